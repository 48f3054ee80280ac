#!/usr/bin/env bash
# Seeds fuzz/corpus/<target> from the small files of the shared corpus, so the fuzzers start
# from real gzip/zlib/raw streams and headers rather than from nothing. Needs gzip and python3.
set -euo pipefail
cd "$(dirname "$0")"
src="${ZIPWIRE_CORPUS:-$(pwd)/../../shared/corpus}"
if [ ! -d "$src" ]; then
    echo "seed.sh: no corpus at $src (set ZIPWIRE_CORPUS); fuzzers start empty" >&2
    exit 0
fi
mkdir -p corpus/inflate corpus/gzip_header corpus/roundtrip
# Files up to 8 KB: big enough to hold every block type, small enough for libFuzzer's -max_len.
find "$src" -type f -size -8k | sort | while read -r file; do
    name=$(basename "$file")
    # gzip_header takes raw bytes: a gzip member with the file name in its header.
    gzip -9 -N -c "$file" > "corpus/gzip_header/$name.gz"
    # inflate's input is `Case`: format byte, two absent limits, chunk and window (u16 LE),
    # then the stream. 0 = gzip, 1 = zlib, 2 = raw.
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
    # roundtrip's input is `Case`: format, level, finish flag, then the chunks; libFuzzer
    # mutates from here.
    printf '\x00\x00\x01' > "corpus/roundtrip/$name"
    head -c 2048 "$file" >> "corpus/roundtrip/$name"
done
echo "seed.sh: seeded $(ls corpus/inflate | wc -l) inflate, $(ls corpus/gzip_header | wc -l) gzip_header, $(ls corpus/roundtrip | wc -l) roundtrip inputs from $src"
