#!/usr/bin/env bash
# bench/dictionaries.sh: RFC 9842 compression dictionaries through zipwire, on the library
# version pairs of $ZIPWIRE_CORPUS/versions (jQuery, Bootstrap JS and CSS, d3, lodash, Vue),
# with no change at the origin (nginx serving the files with `Cache-Control: max-age=3600`).
#
# (a) Bytes of the new version for a client holding the old one: zipwire's dcz and dcb
#     deltas (the proxy marks the old version itself, `mode = "auto"`) on the miss path (no
#     cache: compressed as it streams, at the request-path levels) and from the cache (after
#     WARMUP seconds of background recompression: zstd 19, brotli 11), against what a client
#     without a dictionary gets at best from the same file: `gzip -9`, `brotli -q 11`,
#     `zstd -19`. The `zstd --patch-from` column is the reference delta made by the zstd
#     command (plus dcz's 40-byte header). Every delta is decoded with the zstd command
#     (dcz) or checked by the proxy's own decoder test suite (dcb), and compared with the file.
# (c) hits/s of cache hits for the new jQuery in br, dcz and dcb (wrk -t1, CONNS
#     connections, DURATION s, the proxy on one core), alternating in ROUNDS rounds; the
#     medians of dcz/br and dcb/br per round. Then the dictionary store's bytes against its cap.
#
# No other proxy is in the table: nginx, HAProxy, Caddy and Varnish have no dictionary
# support (Pingora encodes dcz only with bytes its application supplies), so the peers here
# are the best codings a client without a dictionary can get.
#
# Environment: DURATION [10], CONNS [500], ROUNDS [3], WARMUP [15], PROXY_CPU [0],
# LOAD_CPU [1], ORIGIN_PORT [18090], PROXY_PORT [18091], ZIPWIRE [target/release/zipwire].
# Needs nginx, curl, wrk, gzip, brotli, zstd, python3 (apt-get install them).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${ZIPWIRE_CORPUS:-$ROOT/../shared/corpus}
VERSIONS=$CORPUS/versions
ZIPWIRE=${ZIPWIRE:-$ROOT/target/release/zipwire}
DURATION=${DURATION:-10}
CONNS=${CONNS:-500}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-15}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
ORIGIN_PORT=${ORIGIN_PORT:-18090}
PROXY_PORT=${PROXY_PORT:-18091}
ADMIN_PORT=$((PROXY_PORT + 2))
PAIRS="jquery-3.7.0.min.js:jquery-3.7.1.min.js
bootstrap-5.3.7.bundle.min.js:bootstrap-5.3.8.bundle.min.js
bootstrap-5.3.7.min.css:bootstrap-5.3.8.min.css
d3-7.8.5.min.js:d3-7.9.0.min.js
lodash-4.17.20.min.js:lodash-4.17.21.min.js
vue-3.5.12.global.prod.js:vue-3.5.13.global.prod.js"

die() {
    echo "dictionaries.sh: $*" >&2
    exit 1
}
for tool in nginx curl wrk gzip brotli zstd python3; do
    command -v "$tool" > /dev/null || die "$tool is missing (apt-get install $tool)"
done
[ -x "$ZIPWIRE" ] || die "no $ZIPWIRE: cargo build --release -p zipwire"
[ -d "$VERSIONS" ] || die "no corpus at $VERSIONS (set ZIPWIRE_CORPUS)"
echo "# zipwire: $ZIPWIRE, tree at $(git -C "$ROOT" describe --always --dirty 2> /dev/null || echo '(no git)')"
if [ -n "$(find "$ROOT/crates" -name '*.rs' -newer "$ZIPWIRE" -print -quit 2> /dev/null)" ]; then
    echo "warning: $ZIPWIRE is older than the sources: cargo build --release -p zipwire" >&2
fi

WORK=$(mktemp -d /tmp/zipwire-dictionaries.XXXXXX)
mkdir -p "$WORK/origin-tmp"
ORIGIN_PID=
PROXY_PID=
stop_pid() {
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2> /dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$1" 2> /dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$1" 2> /dev/null || true
}
cleanup() {
    stop_pid "$PROXY_PID"
    stop_pid "$ORIGIN_PID"
    wait 2> /dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_http() {
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$1/jquery-3.7.0.min.js" && return 0
        sleep 0.1
    done
    return 1
}

# The origin: the cache benchmark's nginx (gzip off, `expires 1h`, ETags) on the versions.
user_directive=""
[ "$(id -u)" = 0 ] && user_directive="user root;"
sed -e "s|@WORK@|$WORK|g" -e "s|@WEB@|$VERSIONS|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" \
    -e "s|@USER_DIRECTIVE@|$user_directive|g" "$ROOT/bench/conf/origin-nginx-cache.conf" > "$WORK/origin.conf"
taskset -c "$LOAD_CPU" nginx -p "$WORK" -c "$WORK/origin.conf" -g 'daemon off;' 2> "$WORK/origin.stderr" &
ORIGIN_PID=$!
wait_http "$ORIGIN_PORT" || die "the origin did not start: $(cat "$WORK/origin.stderr")"

# Starts zipwire on one core with `[cache] mode = $1` ("off", "fresh").
start_proxy() {
    stop_pid "$PROXY_PID"
    cat > "$WORK/zipwire.toml" << EOF
listen = "127.0.0.1:$PROXY_PORT"
upstreams = ["http://127.0.0.1:$ORIGIN_PORT"]
admin = "127.0.0.1:$ADMIN_PORT"
threads = 1
access_log = false
[cache]
mode = "$1"
[dictionaries]
mode = "auto"
EOF
    taskset -c "$PROXY_CPU" "$ZIPWIRE" proxy --config "$WORK/zipwire.toml" > "$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    wait_http "$PROXY_PORT" || die "zipwire did not start: $(tail -5 "$WORK/proxy.log")"
}

# `:base64(sha256(file)):`, as Chromium sends it.
available() {
    python3 -c 'import base64, hashlib, sys; print(":" + base64.b64encode(hashlib.sha256(open(sys.argv[1], "rb").read()).digest()).decode() + ":")' "$1"
}

# Fetches /$1 through the proxy with Accept-Encoding $2 (and Available-Dictionary $3 if
# given) into $WORK/body; prints the body's size and checks Content-Encoding is $4.
fetch() {
    local args=(-s -o "$WORK/body" -D "$WORK/head" -H "Accept-Encoding: $2")
    [ -n "${3:-}" ] && args+=(-H "Available-Dictionary: $3")
    curl "${args[@]}" "http://127.0.0.1:$PROXY_PORT/$1"
    local coding
    coding=$(tr -d '\r' < "$WORK/head" | awk -F': ' 'tolower($1) == "content-encoding" { print $2 }')
    [ "$coding" = "$4" ] || die "/$1 came as '${coding:-identity}', not $4"
    stat -c %s "$WORK/body"
}

# Checks $WORK/body, a dcz body, decodes with the zstd command against $1 to $2.
check_dcz() {
    zstd -q -d -c -D "$1" "$WORK/body" | cmp -s - "$2" || die "the dcz body of $2 does not decode to it"
}

# One delta of each coding for every pair; $1 names the path ("miss", "cache").
declare -A SIZE
deltas() {
    local path=$1 pair old new hash
    while IFS=: read -r old new; do
        fetch "$old" br "" br > /dev/null
        hash=$(available "$VERSIONS/$old")
        if [ "$path" = cache ]; then
            # The miss stores the entry; the first hit of each coding makes its delta.
            fetch "$new" "br, dcz" "$hash" dcz > /dev/null
            fetch "$new" "br, dcz" "$hash" dcz > /dev/null
            fetch "$new" "br, dcb" "$hash" dcb > /dev/null
            fetch "$new" br "" br > /dev/null
            continue
        fi
        SIZE[$new/miss-dcz]=$(fetch "$new" "br, dcz" "$hash" dcz)
        check_dcz "$VERSIONS/$old" "$VERSIONS/$new"
        SIZE[$new/miss-dcb]=$(fetch "$new" "br, dcb" "$hash" dcb)
    done <<< "$PAIRS"
    if [ "$path" = cache ]; then
        sleep "$WARMUP"
        while IFS=: read -r old new; do
            hash=$(available "$VERSIONS/$old")
            SIZE[$new/cache-dcz]=$(fetch "$new" "br, dcz" "$hash" dcz)
            check_dcz "$VERSIONS/$old" "$VERSIONS/$new"
            SIZE[$new/cache-dcb]=$(fetch "$new" "br, dcb" "$hash" dcb)
        done <<< "$PAIRS"
    fi
}

echo "dictionaries.sh: (a) bytes per pair; (c) $ROUNDS rounds of br, dcz and dcb hits," \
    "${DURATION}s each at $CONNS connections, about $((WARMUP + 3 * ROUNDS * (DURATION + 2) + 20))s in all"
start_proxy off
deltas miss
start_proxy fresh
deltas cache

printf '\n(a) bytes of the new version for a client holding the old one\n'
printf '%-30s | %9s | %9s | %9s | %9s | %9s | %9s | %9s | %9s | %9s\n' file size "gzip -9" "br 11" "zstd 19" \
    "patch-from" "miss dcz" "miss dcb" "cache dcz" "cache dcb"
declare -A SUM
while IFS=: read -r old new; do
    file=$VERSIONS/$new
    SIZE[$new/size]=$(stat -c %s "$file")
    SIZE[$new/gzip]=$(gzip -9 -c "$file" | wc -c)
    SIZE[$new/br]=$(brotli -q 11 -c "$file" | wc -c)
    SIZE[$new/zstd]=$(zstd -q -19 -c "$file" | wc -c)
    SIZE[$new/patch]=$(($(zstd -q -19 --patch-from="$VERSIONS/$old" -c "$file" 2> /dev/null | wc -c) + 40))
    row="$(printf '%-30s' "$new")"
    for column in size gzip br zstd patch miss-dcz miss-dcb cache-dcz cache-dcb; do
        value=${SIZE[$new/$column]}
        SUM[$column]=$((${SUM[$column]:-0} + value))
        row+=" | $(printf '%9s' "$value")"
    done
    echo "$row"
done <<< "$PAIRS"
row="$(printf '%-30s' "sum")"
for column in size gzip br zstd patch miss-dcz miss-dcb cache-dcz cache-dcb; do
    row+=" | $(printf '%9s' "${SUM[$column]}")"
done
echo "$row"
row="$(printf '%-30s' "× br 11")"
for column in size gzip br zstd patch miss-dcz miss-dcb cache-dcz cache-dcb; do
    row+=" | $(printf '%9s' "$(python3 -c "print(f'{${SUM[$column]} / ${SUM[br]}:.3f}')")")"
done
echo "$row"

# (c) hits/s, the cache warm with every coding at its best level.
new=jquery-3.7.1.min.js
hash=$(available "$VERSIONS/jquery-3.7.0.min.js")
rate() {
    local args=(-t1 "-c$CONNS" "-d${DURATION}s" -H "Accept-Encoding: $1")
    [ -n "${2:-}" ] && args+=(-H "Available-Dictionary: $2")
    taskset -c "$LOAD_CPU" timeout $((DURATION + 30)) wrk "${args[@]}" "http://127.0.0.1:$PROXY_PORT/$new" \
        | awk '/^Requests\/sec:/ { printf "%d", $2 }'
}
printf '\n(c) cache hits/s for %s, %s connections, zipwire on one core\n' "$new" "$CONNS"
printf '%-6s | %8s | %8s | %8s | %7s | %7s\n' round br dcz dcb dcz/br dcb/br
ratios_z=()
ratios_b=()
for round in $(seq "$ROUNDS"); do
    br=$(rate br)
    dcz=$(rate "br, dcz" "$hash")
    dcb=$(rate "br, dcb" "$hash")
    rz=$(python3 -c "print(f'{$dcz / $br:.3f}')")
    rb=$(python3 -c "print(f'{$dcb / $br:.3f}')")
    ratios_z+=("$rz")
    ratios_b+=("$rb")
    printf '%-6s | %8s | %8s | %8s | %7s | %7s\n' "$round" "$br" "$dcz" "$dcb" "$rz" "$rb"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
printf 'median dcz/br %s, dcb/br %s\n' "$(median "${ratios_z[@]}")" "$(median "${ratios_b[@]}")"
stats=$(curl -s "http://127.0.0.1:$ADMIN_PORT/stats")
python3 - "$stats" << 'EOF'
import json, sys
d = json.loads(sys.argv[1])["dictionaries"]
print(f"dictionary store: {d['held']} held, {d['bytes_held']} bytes (cap 67108864); "
      f"deltas sent: dcz {d['dcz']}, dcb {d['dcb']}; unknown {d['unknown']}")
EOF
echo "zipwire peak RSS: $(awk '/^VmHWM:/ { print $2, $3 }' "/proc/$PROXY_PID/status")"
