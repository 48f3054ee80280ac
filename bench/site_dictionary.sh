#!/usr/bin/env bash
# bench/site_dictionary.sh: issue 50's (b), a site dictionary on Debian's python3.11-doc.
# nginx serves the HTML documentation (`expires 1h`, gzip off) behind `zipwire proxy`
# (`[dictionaries] mode = "auto"`, `site = true`, cache on, one core). Other visitors first load TRAIN
# pages (every tenth page of the site, none of the sequence), from which the proxy builds
# its site dictionary by itself. Then a visitor with an empty browser cache browses a
# SEQUENCE of 50 pages: the first page in br (it announces the dictionary with `Link`), the
# dictionary itself (in br, as a browser fetches it), then the other 49 pages naming the
# dictionary (Accept-Encoding `br, dcz` or `br, dcb`, as a navigation), each dcz body decoded
# with `zstd -d -D` and compared with the file. A later visitor does the same once the
# cache's worker has made every variant and delta at its best level (a delta streamed on a
# miss is not kept: the first hit makes it, so one more visitor passes before the worker
# settles). Rows `none` are a visitor whose browser has no dictionary support (Accept-Encoding
# `gzip, deflate, br, zstd`), first on the miss path, later from the cache. The peer column
# is `brotli -q 11` of each page, the best a client without a dictionary gets; the ratios
# count the first page and the dictionary's download.
#
# Two sequences, both fixed before measuring: `spread` (every tenth page of the sorted list
# of pages outside the genindex, from the fifth: a visitor reading across the site) and
# `next` (the "next" links from tutorial/index.html: a visitor reading in order).
#
# Environment: PYDOC [a python3.11-doc tree; fetched with apt-get download when unset],
# PROXY_CPU [0], ORIGIN_PORT [18190], PROXY_PORT [18191],
# ZIPWIRE [target/release/zipwire]. Needs nginx, curl, brotli, python3 (apt-get).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZIPWIRE=${ZIPWIRE:-$ROOT/target/release/zipwire}
PROXY_CPU=${PROXY_CPU:-0}
ORIGIN_PORT=${ORIGIN_PORT:-18190}
PROXY_PORT=${PROXY_PORT:-18191}
ADMIN_PORT=$((PROXY_PORT + 2))

die() {
    echo "site_dictionary.sh: $*" >&2
    exit 1
}
for tool in nginx curl brotli python3; do
    command -v "$tool" > /dev/null || die "$tool is missing (apt-get install $tool)"
done
[ -x "$ZIPWIRE" ] || die "no $ZIPWIRE: cargo build --release -p zipwire"

WORK=$(mktemp -d /tmp/zipwire-site.XXXXXX)
mkdir -p "$WORK/origin-tmp"
ORIGIN_PID=
PROXY_PID=
cleanup() {
    for pid in $PROXY_PID $ORIGIN_PID; do
        kill -TERM "$pid" 2> /dev/null || true
    done
    wait 2> /dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${PYDOC:-}" ]; then
    (cd "$WORK" && apt-get download python3.11-doc > /dev/null 2>&1) ||
        die "apt-get download python3.11-doc failed (or set PYDOC to the html directory)"
    dpkg -x "$WORK"/python3.11-doc_*.deb "$WORK/pkg"
    PYDOC=$WORK/pkg/usr/share/doc/python3.11/html
fi
[ -f "$PYDOC/index.html" ] || die "no python docs at $PYDOC"
echo "# zipwire: $ZIPWIRE, tree at $(git -C "$ROOT" describe --always --dirty 2> /dev/null || echo '(no git)')"
echo "# python3.11-doc: $PYDOC"

user_directive=""
[ "$(id -u)" = 0 ] && user_directive="user root;"
sed -e "s|@WORK@|$WORK|g" -e "s|@WEB@|$PYDOC|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" \
    -e "s|@USER_DIRECTIVE@|$user_directive|g" "$ROOT/bench/conf/origin-nginx-cache.conf" > "$WORK/origin.conf"
nginx -p "$WORK" -c "$WORK/origin.conf" -g 'daemon off;' 2> "$WORK/origin.stderr" &
ORIGIN_PID=$!

cat > "$WORK/zipwire.toml" << EOF
listen = "127.0.0.1:$PROXY_PORT"
upstreams = ["http://127.0.0.1:$ORIGIN_PORT"]
admin = "127.0.0.1:$ADMIN_PORT"
threads = 1
access_log = false
[cache]
mode = "fresh"
[dictionaries]
mode = "auto"
site = true
EOF
taskset -c "$PROXY_CPU" "$ZIPWIRE" proxy --config "$WORK/zipwire.toml" > "$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/index.html" && break
    sleep 0.1
done

python3 "$ROOT/bench/site_dictionary.py" "$PYDOC" "$PROXY_PORT" "$ADMIN_PORT" ||
    die "failed; the proxy's log: $(tail -5 "$WORK/proxy.log")"
