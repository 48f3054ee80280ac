#!/usr/bin/env bash
# bench/tunnel.sh: zipwire tunnel (adaptive, and fixed raw/1/6) against plain TCP, ssh and
# ssh -C, over a veth pair between two network namespaces rate-limited with tc tbf at 10, 100,
# 1000 Mbit/s and unlimited; payload MB/s per cell, all in one run (see bench/tunnel.py).
#
# Environment (defaults in brackets):
#   SIZE [30000000]    bytes per transfer at 1 Gbit/s and unlimited (a tenth at 10 Mbit/s,
#                      a third at 100 Mbit/s, so that a run stays within minutes)
#   ROUNDS [3]         alternating rounds; the table shows medians
#   LINKS [10,100,1000,0]  Mbit/s; 0 is unlimited
#   ZIPWIRE_CORPUS [../shared/corpus from the repository root]
#   ZIPWIRE [target/release/zipwire, built if missing]
#   PLOT [tunnel.svg]      draw payload MB/s per link and data kind here (zipwire bench plot), the rows
#                      beside it in the same name ending .tsv; PLOT= for none
#
# Needs root (network namespaces, tc, sshd); installs openssh-server and iproute2 if missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ZIPWIRE_CORPUS=${ZIPWIRE_CORPUS:-$ROOT/../shared/corpus}
export ZIPWIRE=${ZIPWIRE:-$ROOT/target/release/zipwire}

if [ "$(id -u)" != 0 ]; then
    echo "tunnel.sh: needs root for network namespaces and tc" >&2
    exit 1
fi
missing=()
for tool in ip tc sshd ssh ssh-keygen python3; do
    command -v "$tool" > /dev/null || [ -x "/usr/sbin/$tool" ] || missing+=("$tool")
done
if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        openssh-server openssh-client iproute2 python3 > /dev/null
fi
if [ ! -x "$ZIPWIRE" ]; then
    (cd "$ROOT" && cargo build --release -q -p zipwire)
fi
# Which build is measured: the commit, and a warning when a source is newer than the binary
# (the table would be another commit's).
if [ -x "$ZIPWIRE" ]; then
    echo "# zipwire: $ZIPWIRE, tree at $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '(no git)')"
    if [ -n "$(find "$ROOT/crates" -name '*.rs' -newer "$ZIPWIRE" -print -quit 2>/dev/null)" ]; then
        echo "warning: $ZIPWIRE is older than the sources: cargo build --release -p zipwire" >&2
    fi
fi
exec python3 "$ROOT/bench/tunnel.py" "$@"
