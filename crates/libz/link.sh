#!/bin/sh
# Links libzipwire_z.versioned.so, the drop-in zlib with zlib's symbol versions, from the static
# library cargo builds beside the cdylib:
#
#   cargo build --release -p zipwire-libz && crates/libz/link.sh [TARGET_PROFILE_DIR]
#
# The directory defaults to target/release. Programs built against Debian's zlib ask the loader
# for its version nodes (ZLIB_1.2.0 and later); a library without them still serves every
# call, but the loader prints "no version information available" on each program's stderr.
# rustc gives a cdylib a version script of its own, which linkers take before any other, so
# the versions are applied here, by linking the static library again with zlib.map.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../../target/release}
archive=$dir/libzipwire_z.a
out=$dir/libzipwire_z.versioned.so
[ -f "$archive" ] || { echo "link.sh: no $archive (cargo build -p zipwire-libz first)" >&2; exit 1; }
# The system libraries are those `cargo rustc -- --print native-static-libs` names.
cc -shared -o "$out.$$" -Wl,-soname,libz.so.1 -Wl,--version-script="$here/zlib.map" \
    -Wl,--gc-sections -Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
mv -f "$out.$$" "$out"
echo "$out"
