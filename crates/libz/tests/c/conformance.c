/* zlib conformance for crates/libz (issue 25): one program, built against zlib.h and linked
 * once with the system zlib and once with libzipwire_z.so.
 *
 *   conformance compress SEED OUTDIR FILE...   deflate every FILE under random settings,
 *                                              splits and flushes; write the streams and
 *                                              OUTDIR/index
 *   conformance verify OUTDIR                  inflate every stream of OUTDIR/index (run
 *                                              linked with the system zlib) and compare
 *   conformance which                          print the library deflate() comes from
 *
 * Any broken rule prints "FAIL ..." and exits 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define INPUT_CAP (192 * 1024)

static uint64_t rng;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return n ? (uint32_t)(rng % n) : 0;
}

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); failures++; return -1; } } while (0)

/* A counting allocator: every byte of stream state must come through zalloc. */
typedef struct { size_t live, peak, calls; } Counter;
typedef struct { size_t size; size_t pad; } Head;
static voidpf count_alloc(voidpf opaque, uInt items, uInt size) {
    Counter *c = opaque;
    Head *h = malloc(sizeof(Head) + (size_t)items * size);
    if (!h) return NULL;
    h->size = (size_t)items * size;
    c->live += h->size; c->calls++;
    if (c->live > c->peak) c->peak = c->live;
    return h + 1;
}
static void count_free(voidpf opaque, voidpf p) {
    Counter *c = opaque;
    Head *h = (Head *)p - 1;
    c->live -= h->size;
    free(h);
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = malloc(INPUT_CAP);
    *len = fread(buf, 1, INPUT_CAP, f);
    fclose(f);
    return buf;
}

static int ends_with_sync(const unsigned char *out, size_t len) {
    return len >= 4 && out[len - 4] == 0 && out[len - 3] == 0 && out[len - 2] == 0xff
        && out[len - 1] == 0xff;
}

static const int FLUSHES[] = {Z_NO_FLUSH, Z_NO_FLUSH, Z_NO_FLUSH, Z_PARTIAL_FLUSH, Z_SYNC_FLUSH,
                              Z_FULL_FLUSH, Z_BLOCK};

/* Deflates data with random splits; the stream goes to *out. A stream copied mid-way
 * (deflateCopy) goes on in both: the original's stream goes to *twin. Returns 0 or -1. */
static int one_stream(const unsigned char *data, size_t n, int level, int wb, int variant,
                      const unsigned char *dict, unsigned dict_len, unsigned char **out,
                      size_t *out_len, unsigned char **twin, size_t *twin_len,
                      Counter *counter) {
    z_stream streams[2];
    memset(streams, 0, sizeof streams);
    z_stream *s = &streams[0];
    s->zalloc = count_alloc; s->zfree = count_free; s->opaque = counter;
    int mem = 1 + (int)rnd(9);
    int ret = deflateInit2(s, level, Z_DEFLATED, wb, mem, Z_DEFAULT_STRATEGY);
    CHECK(ret == Z_OK, "deflateInit2(%d, %d, %d) = %d", level, wb, mem, ret);
    gz_header head;
    memset(&head, 0, sizeof head);
    static unsigned char extra[] = "zipwire-extra";
    head.text = 1; head.time = 1234567; head.os = 3; head.name = (Bytef *)"conformance.txt";
    head.comment = (Bytef *)"issue 25"; head.extra = extra; head.extra_len = 13;
    head.hcrc = 1;
    if (variant & 1) { /* a reset with input already taken: the next stream starts clean */
        unsigned char junk[256];
        s->next_in = (Bytef *)data; s->avail_in = n < 1000 ? (uInt)n : 1000;
        s->next_out = junk; s->avail_out = sizeof junk;
        ret = deflate(s, Z_NO_FLUSH);
        CHECK(ret == Z_OK, "deflate before reset = %d", ret);
        CHECK(deflateReset(s) == Z_OK, "deflateReset");
        CHECK(s->total_in == 0 && s->total_out == 0, "totals after reset");
    }
    if (wb > 15) CHECK(deflateSetHeader(s, &head) == Z_OK, "deflateSetHeader");
    else CHECK(deflateSetHeader(s, &head) == Z_STREAM_ERROR, "deflateSetHeader on non-gzip");
    if (dict) CHECK(deflateSetDictionary(s, dict, dict_len) == Z_OK, "deflateSetDictionary");

    /* zlib counts a dictionary (up to the window) in total_in: count from here. */
    uLong base = s->total_in;
    size_t cap = n + n / 2 + 4096, len = 0, pos = 0;
    unsigned char *buf = malloc(cap);
    int copied = 0, param_changes = 0;
    while (pos < n) {
        uInt limits[] = {1, 7, 300, 5000, 40000, 70000};
        uInt chunk = 1 + rnd(limits[rnd(6)]);
        if (chunk > n - pos) chunk = (uInt)(n - pos);
        int flush = FLUSHES[rnd(7)];
        s->next_in = (Bytef *)data + pos; s->avail_in = chunk;
        int filled = 0;
        do {
            if (cap - len < 70000) { cap *= 2; buf = realloc(buf, cap); }
            uInt room = 1 + rnd(rnd(2) ? 16 : 70000);
            s->next_out = buf + len; s->avail_out = room;
            ret = deflate(s, flush);
            CHECK(ret == Z_OK || ret == Z_BUF_ERROR, "deflate(flush %d) = %d", flush, ret);
            /* After a call that filled the output, the same call again is progress (OpenSSH
             * treats Z_BUF_ERROR there as an error). */
            CHECK(!(filled && ret == Z_BUF_ERROR), "Z_BUF_ERROR after a full output buffer");
            filled = s->avail_out == 0;
            len += room - s->avail_out;
        } while (s->avail_out == 0);
        CHECK(s->avail_in == 0, "input left with output room");
        pos += chunk;
        CHECK(s->total_in - base == pos && s->total_out == len, "totals %lu/%zu %lu/%zu", s->total_in - base,
              pos, s->total_out, len);
        if ((flush == Z_SYNC_FLUSH || flush == Z_FULL_FLUSH) && ret == Z_OK)
            CHECK(ends_with_sync(buf, len), "sync flush does not end with 00 00 ff ff");
        if ((variant & 2) && rnd(8) == 0 && param_changes < 4) {
            static const int levels[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1};
            int newlevel = levels[rnd(11)];
            if (cap - len < 70000) { cap *= 2; buf = realloc(buf, cap); }
            s->next_out = buf + len; s->avail_out = 70000;
            ret = deflateParams(s, newlevel, rnd(4) ? Z_DEFAULT_STRATEGY : Z_FILTERED);
            CHECK(ret == Z_OK || ret == Z_BUF_ERROR, "deflateParams = %d", ret);
            len += 70000 - s->avail_out;
            param_changes++;
        }
        if ((variant & 4) && !copied && pos > n / 2) { /* copy, then both streams go on */
            copied = 1;
            ret = deflateCopy(&streams[1], s);
            CHECK(ret == Z_OK, "deflateCopy = %d", ret);
            /* The original takes the rest in one call, finishing into its own buffer; the copy
             * goes on with the random splits. Both must inflate to the input. */
            unsigned char *mine = malloc(len + n - pos + 70000);
            size_t mine_len = len;
            memcpy(mine, buf, len);
            s->next_in = (Bytef *)data + pos; s->avail_in = (uInt)(n - pos);
            do {
                uInt room = 1 + rnd(70000);
                s->next_out = mine + mine_len; s->avail_out = room;
                ret = deflate(s, Z_FINISH);
                CHECK(ret == Z_OK || ret == Z_STREAM_END, "original after copy = %d", ret);
                mine_len += room - s->avail_out;
                if (ret != Z_STREAM_END) mine = realloc(mine, mine_len + 70000);
            } while (ret != Z_STREAM_END);
            CHECK(s->total_in - base == n && s->total_out == mine_len, "original's totals");
            CHECK(deflateEnd(s) == Z_OK, "deflateEnd of the original");
            *twin = mine; *twin_len = mine_len;
            s = &streams[1];
        }
    }
    do {
        if (cap - len < 70000) { cap *= 2; buf = realloc(buf, cap); }
        uInt room = 1 + rnd(rnd(2) ? 16 : 70000);
        s->next_out = buf + len; s->avail_out = room; s->avail_in = 0;
        ret = deflate(s, Z_FINISH);
        CHECK(ret == Z_OK || ret == Z_STREAM_END || ret == Z_BUF_ERROR, "finish = %d", ret);
        len += room - s->avail_out;
    } while (ret != Z_STREAM_END);
    CHECK(s->total_in - base == n && s->total_out == len, "final totals");
    if (wb > 15) CHECK(s->adler == crc32(0, data, (uInt)n), "gzip adler is not the crc");
    else if (wb > 0 && !dict) CHECK(s->adler == adler32(1, data, (uInt)n), "zlib adler");
    unsigned char one = 0;
    s->next_out = &one; s->avail_out = 1;
    CHECK(deflate(s, Z_NO_FLUSH) == Z_STREAM_ERROR, "deflate after the end is a stream error");
    CHECK(s->msg != NULL, "no msg on error");
    CHECK(deflateEnd(s) == Z_OK, "deflateEnd");
    CHECK(counter->live == 0, "%zu bytes not freed", counter->live);
    *out = buf; *out_len = len;
    return 0;
}

/* One Z_FINISH call into exactly deflateBound bytes must end the stream. */
static int bound_holds(const unsigned char *data, size_t n, int level, int wb) {
    z_stream s;
    memset(&s, 0, sizeof s);
    CHECK(deflateInit2(&s, level, Z_DEFLATED, wb, 8, Z_DEFAULT_STRATEGY) == Z_OK, "init");
    uLong bound = deflateBound(&s, n);
    unsigned char *out = malloc(bound);
    s.next_in = (Bytef *)data; s.avail_in = (uInt)n; s.next_out = out; s.avail_out = (uInt)bound;
    int ret = deflate(&s, Z_FINISH);
    deflateEnd(&s);
    free(out);
    CHECK(ret == Z_STREAM_END, "deflateBound %lu too small for %zu bytes at level %d wb %d",
          bound, n, level, wb);
    return 0;
}

static int api_errors(void) {
    z_stream s;
    memset(&s, 0, sizeof s);
    CHECK(deflate(NULL, Z_NO_FLUSH) == Z_STREAM_ERROR, "deflate(NULL)");
    CHECK(deflateEnd(NULL) == Z_STREAM_ERROR, "deflateEnd(NULL)");
    CHECK(deflate(&s, Z_NO_FLUSH) == Z_STREAM_ERROR, "deflate on an uninitialised stream");
    CHECK(deflateInit2(&s, 10, Z_DEFLATED, 15, 8, 0) == Z_STREAM_ERROR, "level 10");
    CHECK(deflateInit2(&s, 1, Z_DEFLATED, 16 + 8, 8, 0) == Z_STREAM_ERROR, "gzip wb 8");
    CHECK(deflateInit_(&s, 1, "2.0", (int)sizeof s) == Z_VERSION_ERROR, "version 2");
    CHECK(deflateInit(&s, 1) == Z_OK, "deflateInit");
    unsigned char in[10] = "abcdefghi", out[64];
    s.next_in = in; s.avail_in = 9; s.next_out = out; s.avail_out = 0;
    CHECK(deflate(&s, Z_NO_FLUSH) == Z_BUF_ERROR, "no output room");
    s.next_out = NULL; s.avail_out = 64;
    CHECK(deflate(&s, Z_NO_FLUSH) == Z_STREAM_ERROR, "null next_out");
    s.next_out = out;
    CHECK(deflate(&s, 9) == Z_STREAM_ERROR, "flush 9");
    CHECK(deflate(&s, Z_NO_FLUSH) == Z_OK, "plain deflate");
    CHECK(deflate(&s, Z_NO_FLUSH) == Z_BUF_ERROR, "no progress possible");
    CHECK(deflateParams(&s, 12, 0) == Z_STREAM_ERROR, "deflateParams level 12");
    CHECK(deflateEnd(&s) == Z_DATA_ERROR, "deflateEnd mid-stream");
    CHECK(zlibVersion()[0] == ZLIB_VERSION[0], "zlibVersion %s", zlibVersion());
    CHECK((zlibCompileFlags() & 0xff) == 0xa9, "compile flags %lx", zlibCompileFlags());
    return 0;
}

/* Text-like bytes from a few words, compressible at every level. */
static void fill_text(unsigned char *b, size_t n) {
    static const char *words[] = {"alpha ", "beta ", "<div class=\"x\">", "gamma\n", "0123",
                                  "{\"k\":", "zz", " "};
    size_t i = 0;
    while (i < n) {
        uint32_t x = rnd(1000);
        if (x < 100) { b[i++] = (unsigned char)x; continue; }
        const char *w = words[x % 8];
        for (size_t j = 0; w[j] && i < n; j++) b[i++] = (unsigned char)w[j];
    }
}

/* Inflates n bytes of raw deflate (or wb's format) with a sync flush; returns bytes out. */
static size_t inflate_some(const unsigned char *in, size_t n, unsigned char *out, size_t cap,
                           int wb, const unsigned char *dict, uInt dict_len, int *ret) {
    z_stream s;
    memset(&s, 0, sizeof s);
    inflateInit2(&s, wb);
    s.next_in = (Bytef *)in; s.avail_in = (uInt)n; s.next_out = out; s.avail_out = (uInt)cap;
    *ret = inflate(&s, Z_SYNC_FLUSH);
    if (*ret == Z_NEED_DICT && dict) {
        inflateSetDictionary(&s, dict, dict_len);
        *ret = inflate(&s, Z_SYNC_FLUSH);
    }
    size_t got = cap - s.avail_out;
    inflateEnd(&s);
    return got;
}

/* Flushes after flushes, deflatePending's bits, deflatePrime and deflateParams, as zlib
 * does them: pigz joins streams with Z_BLOCK, deflatePending and deflatePrime or
 * Z_SYNC_FLUSH; a stronger flush after a weaker one with no input between is still written;
 * deflateParams before the first deflate() writes nothing and leaves the stream fresh. */
static int flush_rules(void) {
    enum { N = 60000 };
    static unsigned char data[N], out[2 * N + 4096], back[N + 16];
    static const int levels[] = {1, 2, 3, 6};
    fill_text(data, N);
    for (int l = 0; l < 4; l++) {
        int level = levels[l];
        for (size_t cut = 1; cut < N; cut += 7919) {
            /* pigz: a job ends with Z_BLOCK, then the next job's stream follows on a byte
             * boundary. */
            z_stream s;
            memset(&s, 0, sizeof s);
            CHECK(deflateInit2(&s, level, Z_DEFLATED, -15, 8, 0) == Z_OK, "init");
            s.next_in = data; s.avail_in = (uInt)cut; s.next_out = out; s.avail_out = sizeof out;
            CHECK(deflate(&s, Z_BLOCK) == Z_OK, "Z_BLOCK");
            int bits;
            CHECK(deflatePending(&s, NULL, &bits) == Z_OK && bits >= 0 && bits < 8, "pending");
            if (bits & 1) {
                CHECK(deflate(&s, Z_SYNC_FLUSH) == Z_OK, "sync after Z_BLOCK");
            } else if (bits & 7) {
                do {
                    CHECK(deflatePrime(&s, 10, 2) == Z_OK, "deflatePrime");
                    deflatePending(&s, NULL, &bits);
                } while (bits & 7);
                deflate(&s, Z_BLOCK);
            }
            unsigned pending;
            CHECK(deflatePending(&s, &pending, &bits) == Z_OK && pending == 0 && bits == 0,
                  "level %d cut %zu: %u bytes and %d bits still pending", level, cut, pending,
                  bits);
            size_t first = s.total_out;
            deflateEnd(&s);
            memset(&s, 0, sizeof s);
            deflateInit2(&s, level, Z_DEFLATED, -15, 8, 0);
            s.next_in = data + cut; s.avail_in = (uInt)(N - cut);
            s.next_out = out + first; s.avail_out = (uInt)(sizeof out - first);
            CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "second stream");
            size_t total = first + s.total_out;
            deflateEnd(&s);
            int ret;
            size_t got = inflate_some(out, total, back, sizeof back, -15, NULL, 0, &ret);
            CHECK(ret == Z_STREAM_END && got == N && !memcmp(back, data, N),
                  "level %d cut %zu: joined streams inflate to %zu bytes (%d)", level, cut, got,
                  ret);
        }
        /* A weaker flush, then a stronger one with no input between: both are written. */
        static const int pairs[][2] = {{Z_BLOCK, Z_SYNC_FLUSH}, {Z_PARTIAL_FLUSH, Z_SYNC_FLUSH},
                                       {Z_BLOCK, Z_FULL_FLUSH}, {Z_SYNC_FLUSH, Z_FULL_FLUSH}};
        for (int p = 0; p < 4; p++) {
            for (int wb = 9; wb <= 15; wb += 6) {
                z_stream s;
                memset(&s, 0, sizeof s);
                CHECK(deflateInit2(&s, level, Z_DEFLATED, -wb, 8, 0) == Z_OK, "init");
                size_t part = 1000 + (size_t)rnd(20000);
                s.next_in = data; s.avail_in = (uInt)part; s.next_out = out;
                s.avail_out = sizeof out;
                CHECK(deflate(&s, pairs[p][0]) == Z_OK, "first flush");
                CHECK(deflate(&s, pairs[p][1]) == Z_OK, "level %d wb %d: flush %d after %d",
                      level, wb, pairs[p][1], pairs[p][0]);
                size_t at = s.total_out;
                CHECK(ends_with_sync(out, at), "level %d wb %d: flush %d after %d wrote no marker",
                      level, wb, pairs[p][1], pairs[p][0]);
                int ret;
                size_t got = inflate_some(out, at, back, sizeof back, -wb, NULL, 0, &ret);
                CHECK(got == part && !memcmp(back, data, part),
                      "level %d wb %d: %zu of %zu bytes decodable after flush %d then %d", level,
                      wb, got, part, pairs[p][0], pairs[p][1]);
                /* After a full flush a decoder can start with an empty window. */
                s.next_in = data + part; s.avail_in = (uInt)(N - part);
                CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "finish");
                if (pairs[p][1] == Z_FULL_FLUSH) {
                    got = inflate_some(out + at, s.total_out - at, back, sizeof back, -wb, NULL,
                                       0, &ret);
                    CHECK(ret == Z_STREAM_END && got == N - part &&
                              !memcmp(back, data + part, N - part),
                          "level %d wb %d: after a full flush (%d first) %zu of %zu bytes", level,
                          wb, pairs[p][0], got, N - part);
                }
                deflateEnd(&s);
            }
        }
        /* deflateParams before any deflate() touches no buffer and leaves the stream fresh. */
        z_stream s;
        memset(&s, 0, sizeof s);
        CHECK(deflateInit2(&s, level, Z_DEFLATED, 15, 8, 0) == Z_OK, "init");
        s.next_out = NULL; s.avail_out = 0;
        CHECK(deflateParams(&s, level == 6 ? 1 : 6, 0) == Z_OK, "deflateParams on a fresh stream");
        CHECK(s.total_out == 0 && s.next_out == NULL, "deflateParams wrote %lu bytes", s.total_out);
        CHECK(deflateSetDictionary(&s, data + 100, 300) == Z_OK, "dictionary after deflateParams");
        s.next_in = data; s.avail_in = N; s.next_out = out; s.avail_out = sizeof out;
        CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "finish");
        int ret;
        size_t got = inflate_some(out, s.total_out, back, sizeof back, 15, data + 100, 300, &ret);
        CHECK(ret == Z_STREAM_END && got == N && !memcmp(back, data, N), "with the dictionary");
        CHECK(deflateEnd(&s) == Z_OK, "deflateEnd");
    }
    /* A level changed mid-stream takes effect: level 1, then 6, beats level 1 throughout. */
    size_t sizes[2];
    for (int change = 0; change < 2; change++) {
        z_stream s;
        memset(&s, 0, sizeof s);
        CHECK(deflateInit2(&s, 1, Z_DEFLATED, 15, 8, 0) == Z_OK, "init");
        s.next_in = data; s.avail_in = N / 8; s.next_out = out; s.avail_out = sizeof out;
        CHECK(deflate(&s, Z_NO_FLUSH) == Z_OK, "deflate");
        if (change) CHECK(deflateParams(&s, 6, 0) == Z_OK, "deflateParams mid-stream");
        s.avail_in = N - N / 8;
        CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "finish");
        sizes[change] = s.total_out;
        int ret;
        size_t got = inflate_some(out, s.total_out, back, sizeof back, 15, NULL, 0, &ret);
        CHECK(ret == Z_STREAM_END && got == N && !memcmp(back, data, N), "level change");
        deflateEnd(&s);
    }
    CHECK(sizes[1] < sizes[0], "level 6 from 1/8 on: %zu bytes, level 1 throughout: %zu",
          sizes[1], sizes[0]);
    /* deflateParams with the caller's next input offered but not deflated yet: a change of
     * approach (zlib's stored, fast or lazy, by level) compresses it first, so Z_OK means all
     * of it was taken, and a program that then refills its buffer loses nothing. */
    static const int changes[][2] = {{1, 6}, {6, 1}, {6, 0}, {1, 9}, {2, 0}};
    for (int c = 0; c < 5; c++) {
        z_stream s;
        memset(&s, 0, sizeof s);
        CHECK(deflateInit2(&s, changes[c][0], Z_DEFLATED, 15, 8, 0) == Z_OK, "init");
        s.next_in = data; s.avail_in = N / 4; s.next_out = out; s.avail_out = sizeof out;
        CHECK(deflate(&s, Z_NO_FLUSH) == Z_OK, "deflate");
        s.avail_in = N / 4;
        CHECK(deflateParams(&s, changes[c][1], 0) == Z_OK, "deflateParams %d->%d", changes[c][0],
              changes[c][1]);
        CHECK(s.avail_in == 0, "deflateParams %d->%d returned Z_OK with %u bytes of input left",
              changes[c][0], changes[c][1], s.avail_in);
        s.avail_in = N - N / 2;
        CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "finish");
        int ret;
        size_t got = inflate_some(out, s.total_out, back, sizeof back, 15, NULL, 0, &ret);
        CHECK(ret == Z_STREAM_END && got == N && !memcmp(back, data, N), "input after %d->%d",
              changes[c][0], changes[c][1]);
        deflateEnd(&s);
    }
    /* zlib's bit buffer takes 16 bits at most, whatever the level; a gzip header may be set
     * after the first deflate() (it is the next stream's, after deflateReset). */
    for (int level = 1; level <= 9; level += 4) {
        z_stream s;
        memset(&s, 0, sizeof s);
        CHECK(deflateInit2(&s, level, Z_DEFLATED, 31, 8, 0) == Z_OK, "init");
        CHECK(deflatePrime(&s, 17, 0) == Z_BUF_ERROR, "deflatePrime of 17 bits, level %d", level);
        CHECK(deflatePrime(&s, -1, 0) == Z_BUF_ERROR, "deflatePrime of -1 bits, level %d", level);
        s.next_in = data; s.avail_in = 1000; s.next_out = out; s.avail_out = sizeof out;
        CHECK(deflate(&s, Z_NO_FLUSH) == Z_OK, "deflate");
        gz_header head;
        memset(&head, 0, sizeof head);
        CHECK(deflateSetHeader(&s, &head) == Z_OK, "deflateSetHeader after deflate, level %d", level);
        CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "finish");
        deflateEnd(&s);
    }
    return 0;
}

/* inflate's counters grow by what each call took and wrote, from whatever the program left
 * in them, and inflateSync past damage does not reset total_out: ten full-flushed pieces, the
 * second damaged, then synced to the third. */
static int inflate_counters(void) {
    enum { N = 40000, PIECES = 10 };
    static unsigned char data[N], packed[2 * N], back[N];
    fill_text(data, N);
    z_stream s;
    memset(&s, 0, sizeof s);
    CHECK(deflateInit2(&s, 6, Z_DEFLATED, -15, 8, 0) == Z_OK, "init");
    size_t marks[PIECES + 1];
    s.next_out = packed; s.avail_out = sizeof packed;
    for (int p = 0; p < PIECES; p++) {
        marks[p] = s.total_out;
        s.next_in = data + p * (N / PIECES); s.avail_in = N / PIECES;
        CHECK(deflate(&s, p == PIECES - 1 ? Z_FINISH : Z_FULL_FLUSH) >= Z_OK, "deflate piece %d", p);
    }
    marks[PIECES] = s.total_out;
    deflateEnd(&s);
    memset(packed + marks[1] + 2, 0xff, 8);
    memset(&s, 0, sizeof s);
    CHECK(inflateInit2(&s, -15) == Z_OK, "inflateInit2");
    s.next_in = packed; s.avail_in = (uInt)marks[1];
    s.next_out = back; s.avail_out = sizeof back;
    CHECK(inflate(&s, Z_SYNC_FLUSH) == Z_OK, "first piece");
    CHECK(s.total_out == N / PIECES, "first piece: total_out %lu", s.total_out);
    s.avail_in = (uInt)(marks[PIECES] - marks[1]);
    int ret = inflate(&s, Z_SYNC_FLUSH);
    CHECK(ret == Z_DATA_ERROR, "damaged piece: %d", ret);
    s.next_in = packed + marks[2] - 4; s.avail_in = (uInt)(marks[PIECES] - marks[2] + 4);
    CHECK(inflateSync(&s) == Z_OK, "inflateSync");
    unsigned char *before = s.next_out;
    unsigned long total = s.total_out;
    ret = inflate(&s, Z_FINISH);
    CHECK(ret == Z_STREAM_END || ret == Z_DATA_ERROR, "after sync: %d", ret);
    CHECK(s.total_out - total == (unsigned long)(s.next_out - before),
          "after sync: total_out grew by %lu, %ld bytes written", s.total_out - total,
          (long)(s.next_out - before));
    inflateEnd(&s);
    /* A program that zeroes total_out counts from there. */
    memset(&s, 0, sizeof s);
    CHECK(inflateInit2(&s, -15) == Z_OK, "inflateInit2");
    s.next_in = packed + marks[2]; s.avail_in = (uInt)(marks[3] - marks[2]);
    s.next_out = back; s.avail_out = sizeof back;
    CHECK(inflate(&s, Z_SYNC_FLUSH) == Z_OK, "third piece alone");
    s.total_out = 0;
    s.avail_in = (uInt)(marks[4] - marks[3]);
    CHECK(inflate(&s, Z_SYNC_FLUSH) == Z_OK, "fourth piece");
    CHECK(s.total_out == N / PIECES, "total_out after zeroing: %lu", s.total_out);
    inflateEnd(&s);
    return 0;
}

/* Calls a program may get wrong or rarely makes, answered as zlib answers them: inflate's
 * functions on a deflate stream refuse it and leave it whole; deflateParams to level 0 on a
 * running stream stores what follows; gzprintf after gzbuffer writes all of a text longer
 * than 8 KB, and on a file open for reading is an error. */
static int misuse_and_params(const char *dir) {
    enum { N = 200000 };
    static unsigned char data[N], packed[N + N / 8 + 1024], back[N];
    fill_text(data, N);
    z_stream s;
    memset(&s, 0, sizeof s);
    CHECK(deflateInit(&s, 6) == Z_OK, "deflateInit");
    s.next_in = data; s.avail_in = 1000; s.next_out = packed; s.avail_out = sizeof packed;
    CHECK(deflate(&s, Z_NO_FLUSH) == Z_OK, "deflate");
    CHECK(inflate(&s, Z_NO_FLUSH) == Z_STREAM_ERROR, "inflate on a deflate stream");
    CHECK(inflateSync(&s) == Z_STREAM_ERROR, "inflateSync on a deflate stream");
    CHECK(inflateReset(&s) == Z_STREAM_ERROR, "inflateReset on a deflate stream");
    CHECK(inflateMark(&s) == -(1L << 16), "inflateMark on a deflate stream");
    CHECK(inflateEnd(&s) == Z_STREAM_ERROR, "inflateEnd on a deflate stream");
    int ret = deflateParams(&s, 0, Z_DEFAULT_STRATEGY);
    CHECK(ret == Z_OK, "deflateParams to level 0 after the misuse: %d", ret);
    unsigned long before = s.total_out;
    s.next_in = data + 1000; s.avail_in = N - 1000;
    CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END, "finish at level 0");
    CHECK(s.total_out - before >= N - 1000, "level 0 made %lu bytes of %d", s.total_out - before,
          N - 1000);
    uLongf back_len = N;
    CHECK(uncompress(back, &back_len, packed, s.total_out) == Z_OK && back_len == N
          && !memcmp(back, data, N), "the stream does not inflate to its input");
    CHECK(deflateEnd(&s) == Z_OK, "deflateEnd");

    char path[4096];
    snprintf(path, sizeof path, "%s/printf.gz", dir);
    static char text[20001];
    fill_text((unsigned char *)text, 20000);
    for (int i = 0; i < 20000; i++) if (text[i] == 0 || text[i] == '%') text[i] = '.';
    gzFile g = gzopen(path, "wb");
    CHECK(g != NULL, "gzopen %s", path);
    CHECK(gzbuffer(g, 65536) == 0, "gzbuffer");
    ret = gzprintf(g, "%s", text);
    CHECK(ret == 20000, "gzprintf of 20000 bytes after gzbuffer(g, 65536): %d", ret);
    CHECK(gzclose(g) == Z_OK, "gzclose");
    g = gzopen(path, "rb");
    CHECK(g != NULL, "gzopen %s to read", path);
    int got = gzread(g, back, N);
    ret = gzprintf(g, "more");
    gzclose(g);
    CHECK(got == 20000 && !memcmp(back, text, 20000), "read back %d bytes", got);
    CHECK(ret < 0, "gzprintf on a file open for reading: %d", ret);
    return 0;
}

static int compress_all(uint64_t seed, const char *dir, int nfiles, char **files) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index", dir);
    FILE *index = fopen(path, "w");
    if (!index) { printf("FAIL cannot write %s\n", path); return 1; }
    api_errors();
    rng = seed + 77;
    flush_rules();
    inflate_counters();
    misuse_and_params(dir);
    static const int wbs[] = {15, 31, -15, 9, 25, -9, 12, 8};
    static const int levels[] = {1, 6, 2, 3, 4, 5, 9, 0, -1};
    size_t dict_len = 0;
    unsigned char *dict = read_file(files[0], &dict_len);
    if (dict_len > 2000) dict_len = 2000;
    int k = 0;
    for (int f = 0; f < nfiles; f++) {
        size_t n;
        unsigned char *data = read_file(files[f], &n);
        if (!data) { printf("FAIL cannot read %s\n", files[f]); return 1; }
        for (int c = 0; c < 4; c++, k++) {
            rng = seed * 1000003u + (uint64_t)k * 7919u + 1;
            int wb = wbs[rnd(8)], level = levels[rnd(9)], variant = (int)rnd(8);
            int use_dict = wb > 0 && wb < 16 && rnd(4) == 0;
            Counter counter = {0, 0, 0};
            unsigned char *out, *twin = NULL;
            size_t len, twin_len = 0;
            if (one_stream(data, n, level, wb, variant, use_dict ? dict : NULL,
                           (unsigned)dict_len, &out, &len, &twin, &twin_len, &counter) == 0) {
                snprintf(path, sizeof path, "%s/s%d", dir, k);
                FILE *o = fopen(path, "wb");
                fwrite(out, 1, len, o);
                fclose(o);
                fprintf(index, "s%d %d %d %d %zu %zu %zu %s\n", k, wb, use_dict, level, n,
                        len, counter.peak, files[f]);
                free(out);
                if (twin) { /* the original of a copied stream */
                    snprintf(path, sizeof path, "%s/s%dorig", dir, k);
                    o = fopen(path, "wb");
                    fwrite(twin, 1, twin_len, o);
                    fclose(o);
                    fprintf(index, "s%dorig %d %d %d %zu %zu %zu %s\n", k, wb, use_dict, level,
                            n, twin_len, counter.peak, files[f]);
                    printf("copied s%d wb %d level %d\n", k, wb, level);
                    free(twin);
                }
            } else {
                printf("  at %s level %d wb %d variant %d seed %llu\n", files[f], level, wb,
                       variant, (unsigned long long)seed);
            }
            bound_holds(data, n, level, wb == 8 ? 9 : wb);
        }
        free(data);
    }
    fclose(index);
    return failures ? 1 : 0;
}

static int verify_all(const char *dir) {
    char path[4096], name[64], file[4096];
    snprintf(path, sizeof path, "%s/index", dir);
    FILE *index = fopen(path, "r");
    if (!index) { printf("FAIL no index\n"); return 1; }
    int wb, use_dict, level, count = 0;
    size_t n, len, peak;
    size_t dict_len = 0;
    unsigned char *dict = NULL;
    while (fscanf(index, "%63s %d %d %d %zu %zu %zu %4095s", name, &wb, &use_dict, &level, &n,
                  &len, &peak, file) == 8) {
        if (!dict) { dict = read_file(file, &dict_len); if (dict_len > 2000) dict_len = 2000; }
        size_t orig_len, zlen;
        unsigned char *orig = read_file(file, &orig_len);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *z = fopen(path, "rb");
        unsigned char *zbuf = malloc(len + 1);
        zlen = fread(zbuf, 1, len + 1, z);
        fclose(z);
        unsigned char *plain = malloc(n + 1);
        z_stream s;
        memset(&s, 0, sizeof s);
        inflateInit2(&s, wb == 8 ? 9 : wb);
        gz_header head;
        unsigned char hname[64];
        memset(&head, 0, sizeof head);
        head.name = hname; head.name_max = sizeof hname;
        if (wb > 15) inflateGetHeader(&s, &head);
        if (wb < 0 && use_dict) inflateSetDictionary(&s, dict, (uInt)dict_len);
        s.next_in = zbuf; s.avail_in = (uInt)zlen; s.next_out = plain; s.avail_out = (uInt)n + 1;
        int ret = inflate(&s, Z_FINISH);
        if (ret == Z_NEED_DICT) {
            inflateSetDictionary(&s, dict, (uInt)dict_len);
            ret = inflate(&s, Z_FINISH);
        }
        count++;
        if (ret != Z_STREAM_END || s.total_out != n || orig_len != n || memcmp(plain, orig, n)
            || s.avail_in != 0) {
            printf("FAIL %s (%s level %d wb %d): inflate %d, %lu of %zu bytes\n", name, file,
                   level, wb, ret, s.total_out, n);
            failures++;
        }
        if (wb > 15 && (head.done != 1 || strcmp((char *)hname, "conformance.txt"))) {
            printf("FAIL %s: gzip header not read back\n", name);
            failures++;
        }
        inflateEnd(&s);
        free(orig); free(zbuf); free(plain);
    }
    fclose(index);
    printf("verified %d streams\n", count);
    return failures || count == 0 ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "which")) {
        Dl_info info;
        if (dladdr((void *)deflate, &info) && info.dli_fname) printf("%s\n", info.dli_fname);
        return 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "compress"))
        return compress_all(strtoull(argv[2], NULL, 10), argv[3], argc - 4, argv + 4);
    if (argc == 3 && !strcmp(argv[1], "verify")) return verify_all(argv[2]);
    fprintf(stderr, "usage: conformance compress SEED DIR FILE... | verify DIR | which\n");
    return 2;
}
