/* Prints sizeof and offsetof of zlib.h's z_stream and gz_header, one "name value" a line,
 * for tests/abi.rs to compare with the Rust definitions the library exports. */
#include <stddef.h>
#include <stdio.h>
#include <zlib.h>

#define F(type, field) printf(#type "." #field " %zu\n", offsetof(type, field))

int main(void) {
    printf("z_stream %zu\n", sizeof(z_stream));
    F(z_stream, next_in); F(z_stream, avail_in); F(z_stream, total_in);
    F(z_stream, next_out); F(z_stream, avail_out); F(z_stream, total_out);
    F(z_stream, msg); F(z_stream, state); F(z_stream, zalloc); F(z_stream, zfree);
    F(z_stream, opaque); F(z_stream, data_type); F(z_stream, adler); F(z_stream, reserved);
    printf("gz_header %zu\n", sizeof(gz_header));
    F(gz_header, text); F(gz_header, time); F(gz_header, xflags); F(gz_header, os);
    F(gz_header, extra); F(gz_header, extra_len); F(gz_header, extra_max);
    F(gz_header, name); F(gz_header, name_max); F(gz_header, comment);
    F(gz_header, comm_max); F(gz_header, hcrc); F(gz_header, done);
    return 0;
}
