#!/usr/bin/env bash
# bench/cli.sh: zipwire compress/decompress against gzip, pigz, igzip, libdeflate-gzip and zstd
# on a slice of the large corpus, all in one run with alternating rounds (see bench/cli.py and
# bench/README.md).
#
# Environment (defaults in brackets):
#   SIZE [100000000]   bytes in the slice (the large corpus files, cycled)
#   ROUNDS [3]         alternating rounds; the table shows medians
#   ZIPWIRE_CORPUS [../shared/corpus from the repository root]
#   ZIPWIRE [target/release/zipwire, built if missing]
#   PLOT [cli.svg]      draw MB/s against ratio per command here (zipwire bench plot), the rows
#                      beside it in the same name ending .tsv; PLOT= for none
#
# Needs root only to install missing tools (apt-get: gzip pigz isal libdeflate-tools zstd time).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ZIPWIRE_CORPUS=${ZIPWIRE_CORPUS:-$ROOT/../shared/corpus}
export ZIPWIRE=${ZIPWIRE:-$ROOT/target/release/zipwire}

missing=()
for tool in gzip pigz igzip libdeflate-gzip libdeflate-gunzip zstd python3 /usr/bin/time; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            gzip pigz isal libdeflate-tools zstd python3 time > /dev/null
    else
        echo "cli.sh: missing tools: ${missing[*]}" >&2
        exit 1
    fi
fi
[ -d "$ZIPWIRE_CORPUS/large" ] || { echo "cli.sh: no $ZIPWIRE_CORPUS/large" >&2; exit 1; }
if [ ! -x "$ZIPWIRE" ]; then
    (cd "$ROOT" && cargo build --release -p zipwire)
fi
# Which build is measured: the commit, and a warning when a source is newer than the binary
# (the table would be another commit's).
if [ -x "$ZIPWIRE" ]; then
    echo "# zipwire: $ZIPWIRE, tree at $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '(no git)')"
    if [ -n "$(find "$ROOT/crates" -name '*.rs' -newer "$ZIPWIRE" -print -quit 2>/dev/null)" ]; then
        echo "warning: $ZIPWIRE is older than the sources: cargo build --release -p zipwire" >&2
    fi
fi
echo "# $(uname -srm); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
exec python3 "$ROOT/bench/cli.py"
