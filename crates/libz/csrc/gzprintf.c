/* gzprintf and gzvprintf for zipwire-libz: C variadics, which stable Rust cannot define
 * (src/printf.rs exports them under their zlib names, jumping here).
 * Formats into a buffer and hands it to gzwrite (zlib-rs's, exported by this library), as
 * zlib does with its own buffer; like zlib, returns 0 when the text does not fit. */
#include <stdarg.h>
#include <stdio.h>

typedef struct gzFile_s *gzFile;
extern int gzwrite(gzFile file, const void *buf, unsigned len);

int zipwire_gzvprintf(gzFile file, const char *format, va_list va) {
    char buf[8192];
    int len;
    if (file == NULL || format == NULL) return -2; /* Z_STREAM_ERROR */
    len = vsnprintf(buf, sizeof buf, format, va);
    if (len <= 0 || (unsigned)len >= sizeof buf) return 0;
    return gzwrite(file, buf, (unsigned)len);
}

int zipwire_gzprintf(gzFile file, const char *format, ...) {
    va_list va;
    int ret;
    va_start(va, format);
    ret = zipwire_gzvprintf(file, format, va);
    va_end(va);
    return ret;
}
