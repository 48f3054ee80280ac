#!/bin/sh
# Links libzipwire_z.versioned.so, the drop-in zlib with zlib's symbol versions, from the static
# library cargo builds beside the cdylib:
#
#   cargo build --release -p zipwire-libz && crates/libz/link.sh [TARGET_PROFILE_DIR]
#
# The directory defaults to $CARGO_TARGET_DIR/release (target/release). Programs built
# against Debian's zlib ask the loader for its version nodes (ZLIB_1.2.0 and later); a
# library without them still serves every call, but the loader prints "no version information
# available" on each program's stderr. rustc gives a cdylib a version script of its own, which
# linkers take before any other, so the versions are applied here, by linking the static
# library again with zlib.map. -Bsymbolic-functions binds the library's calls among its own
# exported functions (deflateInit_ to deflateInit2_, gzprintf to gzwrite) inside it: through
# the symbol table, a process that had the system's libz.so.1 first (a program that opens
# this one with dlopen, RTLD_LOCAL) would run the system's functions on this library's
# streams. CC picks the compiler (cc).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${CARGO_TARGET_DIR:-$here/../../target}/release}
archive=$dir/libzipwire_z.a
out=$dir/libzipwire_z.versioned.so
[ -f "$archive" ] || { echo "link.sh: no $archive (cargo build -p zipwire-libz first)" >&2; exit 1; }
# -Xlinker passes a path whole (-Wl, would split one at its commas). The system libraries are
# those `cargo rustc -- --print native-static-libs` names.
${CC:-cc} -shared -o "$out.$$" -Wl,-soname,libz.so.1 -Wl,-Bsymbolic-functions \
    -Xlinker --version-script -Xlinker "$here/zlib.map" -Wl,--gc-sections \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc || { rm -f "$out.$$"; exit 1; }
mv -f "$out.$$" "$out"
echo "$out"
