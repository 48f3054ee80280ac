/* gzprintf and gzvprintf for zipwire-libz: C variadics, which stable Rust cannot define
 * (src/printf.rs exports them under their zlib names, jumping here).
 * Formats the text and hands it to gzwrite (zlib-rs's, exported by this library). zlib
 * formats into its input buffer, whose size gzbuffer() sets (8 KB by default), and returns 0
 * for a text that does not fit; here a text that does not fit in 8 KB is formatted again
 * into a buffer of its own length, so a program that raised the size with gzbuffer() gets
 * all of its text, as with zlib (until 2026-11-28 it got 0 and the text was dropped), and
 * one that did not gets it too, where zlib would have refused it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct gzFile_s *gzFile;
extern int gzwrite(gzFile file, const void *buf, unsigned len);

#define Z_STREAM_ERROR (-2)
#define Z_MEM_ERROR (-4)

/* gzwrite's 0 for a text that is not empty is an error (a file open for reading, a failed
 * write): zlib's gzprintf answers that with an error code, not 0. */
static int written(int n) { return n == 0 ? Z_STREAM_ERROR : n; }

int zipwire_gzvprintf(gzFile file, const char *format, va_list va) {
    char small[8192];
    va_list again;
    int len, ret;
    char *big;
    if (file == NULL || format == NULL) return Z_STREAM_ERROR;
    va_copy(again, va);
    len = vsnprintf(small, sizeof small, format, va);
    if (len <= 0) {
        va_end(again);
        return 0;
    }
    if ((unsigned)len < sizeof small) {
        va_end(again);
        return written(gzwrite(file, small, (unsigned)len));
    }
    big = malloc((size_t)len + 1);
    if (big == NULL) {
        va_end(again);
        return Z_MEM_ERROR;
    }
    if (vsnprintf(big, (size_t)len + 1, format, again) != len) {
        ret = 0;
    } else {
        ret = written(gzwrite(file, big, (unsigned)len));
    }
    va_end(again);
    free(big);
    return ret;
}

int zipwire_gzprintf(gzFile file, const char *format, ...) {
    va_list va;
    int ret;
    va_start(va, format);
    ret = zipwire_gzvprintf(file, format, va);
    va_end(va);
    return ret;
}
