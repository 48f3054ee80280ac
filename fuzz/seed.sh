#!/usr/bin/env bash
# Seeds fuzz/corpus/<target> for every target that takes real data, so the fuzzers start from
# real gzip/zlib/raw streams, headers, tunnel frames and Accept-Encoding lines rather than from
# nothing. Needs gzip, zstd, python3 and ncompress's compress. Under CI=true a missing corpus is
# an error.
set -euo pipefail
cd "$(dirname "$0")"
src="${ZIPWIRE_CORPUS:-$(pwd)/../../shared/corpus}"
if [ ! -d "$src" ]; then
    echo "seed.sh: no corpus at $src (set ZIPWIRE_CORPUS)" >&2
    [ "${CI:-}" = true ] && exit 1
    echo "seed.sh: fuzzers start empty" >&2
    exit 0
fi
mkdir -p corpus/inflate corpus/gzip_header corpus/roundtrip corpus/window corpus/tunnel_frames corpus/accept_encoding \
    corpus/cli_decompress
# Files up to 8 KB: big enough to hold every block type, small enough for libFuzzer's -max_len.
find "$src" -type f -size -8k | sort | while read -r file; do
    name=$(basename "$file")
    # gzip_header: a gzip member with the file name in its header, in the target's framed
    # form (an odd first byte stands for the magic and method, which the target puts back),
    # so that mutations reach the flags and fields (a raw member's odd first byte, 1f, would
    # frame it again, and the target would refuse every seed at once).
    { printf '\x01'; gzip -9 -N -c "$file" | tail -c +4; } > "corpus/gzip_header/$name.gz"
    # inflate's input is `InflateCase`: format byte, two absent limits, chunk and window
    # (u16 LE), then the stream as the rest of the input. 0 = gzip, 1 = zlib, 2 = raw.
    printf '\x00\x00\x00\x00\x10\x00\x10' > "corpus/inflate/$name.gzip"
    gzip -6 -c "$file" >> "corpus/inflate/$name.gzip"
    python3 - "$file" <<'PY'
import sys, zlib
path = sys.argv[1]
data = open(path, 'rb').read()
name = path.rsplit('/', 1)[-1]
for fmt, wbits in ((1, 15), (2, -15)):
    c = zlib.compressobj(6, zlib.DEFLATED, wbits)
    stream = c.compress(data) + c.flush()
    with open('corpus/inflate/%s.%s' % (name, 'zlib' if fmt == 1 else 'raw'), 'wb') as f:
        f.write(bytes([fmt, 0, 0, 0x00, 0x10, 0x00, 0x10]) + stream)
PY
    # roundtrip's input is `RoundtripCase`: format, level, finish flag, then the chunks;
    # libFuzzer mutates from here.
    printf '\x00\x00\x01' > "corpus/roundtrip/$name"
    head -c 2048 "$file" >> "corpus/roundtrip/$name"
    # window's `WindowCase` starts with its level and the calls: the file's bytes become
    # calls.
    head -c 4096 "$file" > "corpus/window/$name"
    # tunnel_frames reads frames back to back: a raw data frame, a stateless-deflate one (raw
    # deflate, level 1), a zstd one (a whole zstd frame, which the streaming decoder reads),
    # then an end frame. Header: 'D' codec level raw_len payload_len (u32 big-endian).
    zstd -q -3 -c "$file" > corpus/.zst
    python3 - "$file" corpus/.zst "corpus/tunnel_frames/$name" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()[:4096] or b'x'
zst = open(sys.argv[2], 'rb').read()
full = open(sys.argv[1], 'rb').read() or b'x'
c = zlib.compressobj(1, zlib.DEFLATED, -15)
deflated = c.compress(data) + c.flush()
def frame(codec, level, raw, payload):
    return b'D' + bytes([codec, level]) + struct.pack('>II', len(raw), len(payload)) + payload
wire = frame(0, 0, data, data) + frame(1, 1, data, deflated)
if len(full) <= 256 * 1024:
    wire += frame(3, 3, full, zst)
open(sys.argv[3], 'wb').write(wire + b'E')
PY
    # cli_decompress takes a flags byte (bit 0: -f's pass-through), then what gzip -d reads:
    # a gzip file, a zip of one entry (deflated and stored), compress's LZW.
    { printf '\x00'; gzip -6 -c "$file"; } > "corpus/cli_decompress/$name.gz"
    python3 - "$file" "corpus/cli_decompress/$name" <<'PY'
import io, sys, zipfile
data = open(sys.argv[1], 'rb').read()
for kind, method in (('deflated', zipfile.ZIP_DEFLATED), ('stored', zipfile.ZIP_STORED)):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w', method) as z:
        z.writestr('entry', data)
    open('%s.%s.zip' % (sys.argv[2], kind), 'wb').write(b'\x00' + buf.getvalue())
PY
    if command -v compress > /dev/null; then
        { printf '\x00'; compress -c "$file"; } > "corpus/cli_decompress/$name.Z"
    elif [ "${CI:-}" = true ]; then
        echo "seed.sh: compress (ncompress) is missing" >&2
        exit 1
    fi
done
rm -f corpus/.zst
# accept_encoding takes header lines split at '\n': what browsers, curl and crawlers send.
i=0
for lines in 'gzip, deflate, br, zstd' 'gzip;q=1.0, identity; q=0.5, *;q=0' 'br;q=1, gzip;q=0.8' \
    'identity' '*' 'deflate\ngzip;q=0.1' 'x-gzip' 'gzip;q=0, *' 'compress, gzip' 'GZIP;Q=0.001'; do
    i=$((i + 1))
    printf "$lines" > "corpus/accept_encoding/seed-$i"
done
# dictionary: a selector byte, then fields and paths one per line; one seed is a zstd delta
# between the starts of two versions of a library (selector 0x80: the first 4096 bytes of the
# rest are the dictionary, the remainder the frame made against it).
mkdir -p corpus/dictionary
i=0
for lines in 'match="/lib/jquery-*.min.js", match-dest=("script"), id="v1"' \
    ':pZGm1Av0IEBKARczz7exkNYsZb8LzaMrV7J32a2fFG4=:' 'gzip, deflate, br, zstd, dcb, dcz' \
    'public, max-age=0, stale-while-revalidate=600' '/static/main.3f9a2c1e.js' '/npm/vue@3.5.13/dist/vue.js'; do
    i=$((i + 1))
    { printf '\x01'; printf '%s' "$lines"; } > "corpus/dictionary/seed-$i"
done
{ printf '\x01'; ls "$src/versions" 2>/dev/null | sed 's|^|/lib/|'; } > corpus/dictionary/paths
if [ -f "$src/versions/jquery-3.7.0.min.js" ]; then
    dict=$(mktemp)
    head -c 4096 "$src/versions/jquery-3.7.0.min.js" > "$dict"
    { printf '\x80'; cat "$dict"; head -c 4096 "$src/versions/jquery-3.7.1.min.js" | zstd -q -c -D "$dict"; } \
        > corpus/dictionary/dcz
    rm -f "$dict"
fi
for target in inflate gzip_header roundtrip window tunnel_frames accept_encoding cli_decompress dictionary; do
    count=$(ls "corpus/$target" | wc -l)
    printf 'seed.sh: %s: %s inputs\n' "$target" "$count"
    if [ "$count" = 0 ] && [ "${CI:-}" = true ]; then
        echo "seed.sh: no seed for $target under CI=true (an empty corpus?)" >&2
        exit 1
    fi
done
