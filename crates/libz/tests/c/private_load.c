/* A program on the system zlib that opens the drop-in privately (a plugin, Python's ctypes):
 * dlopen with RTLD_LOCAL, the system's libz.so.1 loaded first. The library's own calls
 * between its exported functions (deflateInit_ to deflateInit2_, deflateReset, gzprintf to
 * gzwrite) must stay inside it: bound through the symbol table, the system's functions would
 * set up streams the library's deflate refuses. Compresses through the library (init, a
 * stream, reset, a second stream, end, and gzprintf into a file) and checks every output with
 * the system's zlib. Prints what failed and exits 1, or prints "ok". */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

typedef int (*init_fn)(z_streamp, int, const char *, int);
typedef int (*deflate_fn)(z_streamp, int);
typedef int (*stream_fn)(z_streamp);
typedef gzFile (*gzopen_fn)(const char *, const char *);
typedef int (*gzprintf_fn)(gzFile, const char *, ...);
typedef int (*gzclose_fn)(gzFile);

static unsigned char input[100000], packed[200000], unpacked[100000];

static int check(const char *what, unsigned long packed_len) {
    uLongf len = sizeof unpacked;
    int r = uncompress(unpacked, &len, packed, packed_len);
    if (r != Z_OK || len != sizeof input || memcmp(unpacked, input, len) != 0) {
        printf("%s: the system zlib does not get the input back (%d, %lu bytes)\n", what, r,
               (unsigned long)len);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBRARY GZFILE\n", argv[0]);
        return 2;
    }
    if (strcmp(zlibVersion(), ZLIB_VERSION) != 0) {
        printf("the program does not run on the system zlib\n");
        return 1;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    init_fn init = (init_fn)dlsym(lib, "deflateInit_");
    deflate_fn deflate_ = (deflate_fn)dlsym(lib, "deflate");
    stream_fn reset = (stream_fn)dlsym(lib, "deflateReset");
    stream_fn end = (stream_fn)dlsym(lib, "deflateEnd");
    gzopen_fn gzopen_ = (gzopen_fn)dlsym(lib, "gzopen");
    gzprintf_fn gzprintf_ = (gzprintf_fn)dlsym(lib, "gzprintf");
    gzclose_fn gzclose_ = (gzclose_fn)dlsym(lib, "gzclose");
    if (!init || !deflate_ || !reset || !end || !gzopen_ || !gzprintf_ || !gzclose_) {
        printf("dlsym: a zlib function is missing\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof input; i++)
        input[i] = "zipwire drop-in zlib, opened privately\n"[i % 39];

    z_stream s;
    memset(&s, 0, sizeof s);
    int r = init(&s, 6, ZLIB_VERSION, (int)sizeof s);
    if (r != Z_OK) {
        printf("deflateInit_: %d\n", r);
        return 1;
    }
    for (int round = 0; round < 2; round++) {
        s.next_in = input;
        s.avail_in = sizeof input;
        s.next_out = packed;
        s.avail_out = sizeof packed;
        r = deflate_(&s, Z_FINISH);
        if (r != Z_STREAM_END) {
            printf("deflate, stream %d: %d\n", round + 1, r);
            return 1;
        }
        if (!check(round == 0 ? "the first stream" : "the stream after deflateReset",
                   s.total_out))
            return 1;
        r = reset(&s);
        if (r != Z_OK) {
            printf("deflateReset: %d\n", r);
            return 1;
        }
    }
    r = end(&s);
    if (r != Z_OK) {
        printf("deflateEnd: %d\n", r);
        return 1;
    }

    gzFile out = gzopen_(argv[2], "wb");
    if (!out || gzprintf_(out, "%s", "gzprintf through the library\n") <= 0 ||
        gzclose_(out) != Z_OK) {
        printf("gzprintf through the library failed\n");
        return 1;
    }
    gzFile in = gzopen(argv[2], "rb");
    char line[64] = {0};
    if (!in || !gzgets(in, line, sizeof line) ||
        strcmp(line, "gzprintf through the library\n") != 0) {
        printf("the system zlib reads back \"%s\" from gzprintf's file\n", line);
        return 1;
    }
    gzclose(in);
    printf("ok\n");
    return 0;
}
