#!/usr/bin/env bash
# bench/libz.sh: the drop-in zlib (crates/libz, issue 25) against the system zlib, side by side
# in one run:
#   - scp -C of a slice of large/ over a veth pair between two network namespaces, shaped to
#     1 Gbit/s with tc tbf and unshaped: library on both ends, system zlib on both ends, and
#     plain scp (no compression); the same with already-compressed data, the library with
#     ZIPWIRE_ZLIB_ADAPT=1;
#   - nginx (one worker, pinned to one core) with gzip_comp_level 1 and 6 serving the
#     haproxy.org page to wrk, 500 connections: preloaded against the system zlib.
# then the issue's bar, computed from those rows (throughput and client CPU against the system
# zlib and plain scp, ratio, adaptive on compressed data, nginx level 1).
#
# Environment (defaults in brackets):
#   SIZE [100000000]   bytes per scp transfer (the slice of large/, repeated if shorter)
#   LINKS [1000,0]     Mbit/s; 0 is unshaped
#   PIN [0]            1: the client (scp and its ssh) runs on core 0 and the server (sshd and
#                      its sessions) on core 1, as on two hosts; 0: all four processes share
#                      every core
#   PARTS [scp,nginx]  which halves to run
#   DURATION [10]      seconds per wrk run
#   CONNS [500]        wrk connections
#   NGINX_CPU [0]      core nginx is pinned to; wrk runs on LOAD_CPU [1]
#   ZIPWIRE_CORPUS [../shared/corpus from the repository root]
#   LIB [target/release/libzipwire_z.versioned.so, built by cargo and crates/libz/link.sh]
#
# Needs root (network namespaces, tc, sshd). The machine it ran on is shared: figures move
# between runs; compare the rows of one run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${ZIPWIRE_CORPUS:-$ROOT/../shared/corpus}
SIZE=${SIZE:-100000000}
LINKS=${LINKS:-1000,0}
PIN=${PIN:-0}
PARTS=${PARTS:-scp,nginx}
DURATION=${DURATION:-10}
CONNS=${CONNS:-500}
NGINX_CPU=${NGINX_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
if [ -z "${LIB:-}" ]; then
    LIB=$ROOT/target/release/libzipwire_z.versioned.so
    (cd "$ROOT" && cargo build --release -q -p zipwire-libz && sh crates/libz/link.sh > /dev/null)
fi
NS_A=zwlibz-a-$$ NS_B=zwlibz-b-$$ IP_A=10.78.0.1 IP_B=10.78.0.2

die() { echo "libz.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root for network namespaces, tc and sshd"
for tool in ip tc scp ssh-keygen wrk nginx curl python3 taskset; do
    command -v "$tool" > /dev/null || [ -x "/usr/sbin/$tool" ] || die "missing $tool"
done
[ -f "$LIB" ] || die "no $LIB"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2> /dev/null || true; done
    ip netns del "$NS_A" 2> /dev/null || true
    ip netns del "$NS_B" 2> /dev/null || true
    rm -rf "$TMP"
}
# An INT or TERM trap that returns lets bash go on with the next command (with $TMP gone):
# those signals exit, and the EXIT trap cleans up.
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- data: SIZE bytes of large/ (text and a tar), and of incompressible/ --------------------
python3 - "$CORPUS" "$SIZE" "$TMP" << 'PY'
import os, sys
corpus, size, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def slice_of(d, size):
    paths = sorted(os.path.join(d, n) for n in os.listdir(d))
    out = bytearray()
    while len(out) < size:
        for p in paths:
            out += open(p, "rb").read(size - len(out))
            if len(out) >= size:
                break
    return bytes(out)
open(os.path.join(tmp, "large.bin"), "wb").write(slice_of(os.path.join(corpus, "large"), size))
open(os.path.join(tmp, "one.bin"), "wb").write(b"z")
open(os.path.join(tmp, "compressed.bin"), "wb").write(
    slice_of(os.path.join(corpus, "incompressible"), size // 3))
PY

# --- two namespaces, a veth pair, sshd in B (one plain, one preloaded) ---------------------
ip netns del "$NS_A" 2> /dev/null || true
ip netns del "$NS_B" 2> /dev/null || true
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add zlA netns "$NS_A" type veth peer name zlB netns "$NS_B"
ip -n "$NS_A" addr add "$IP_A/24" dev zlA
ip -n "$NS_B" addr add "$IP_B/24" dev zlB
for ns in "$NS_A" "$NS_B"; do
    ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set zlA up
ip -n "$NS_B" link set zlB up

set_link() {
    local mbit=$1
    for pair in "$NS_A zlA" "$NS_B zlB"; do
        set -- $pair
        tc -n "$1" qdisc del dev "$2" root 2> /dev/null || true
        if [ "$mbit" != 0 ]; then
            local burst=$((mbit * 1000000 / 8 / 250))
            [ "$burst" -ge 65536 ] || burst=65536
            tc -n "$1" qdisc add dev "$2" root tbf rate "${mbit}mbit" burst "$burst" latency 20ms
        fi
    done
}

ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/client_key"
cp "$TMP/client_key.pub" "$TMP/authorized_keys"
mkdir -p /run/sshd
CLIENT_CPU=() SERVER_CPU=()
if [ "$PIN" = 1 ]; then
    CLIENT_CPU=(taskset -c 0) SERVER_CPU=(taskset -c 1)
fi
start_sshd() { # port, preload (0/1), adapt (0/1)
    cat > "$TMP/sshd_$1" << CONF
Port $1
ListenAddress $IP_B
HostKey $TMP/host_key
AuthorizedKeysFile $TMP/authorized_keys
PidFile $TMP/sshd_$1.pid
UsePAM no
StrictModes no
PermitRootLogin yes
PasswordAuthentication no
Compression yes
Subsystem sftp internal-sftp
CONF
    local env=()
    [ "$2" = 1 ] && env+=("LD_PRELOAD=$LIB")
    [ "$3" = 1 ] && env+=("ZIPWIRE_ZLIB_ADAPT=1")
    ip netns exec "$NS_B" env "${env[@]}" "${SERVER_CPU[@]}" /usr/sbin/sshd -D -f "$TMP/sshd_$1" -E "$TMP/sshd_$1.log" &
    PIDS+=($!)
    SSHD_PID[$1]=$!
}
declare -A SSHD_PID RESULT
start_sshd 2201 0 0
start_sshd 2202 1 0
start_sshd 2203 1 1
sleep 1
for port in 2202 2203; do
    grep -qF "$(realpath "$LIB")" "/proc/${SSHD_PID[$port]}/maps" 2> /dev/null ||
        { echo "libz.sh: the sshd on port $port did not load $LIB" >&2; exit 1; }
done

# CPU seconds of an sshd's finished sessions: its reaped children's user + system time
# (/proc/PID/stat fields 16 and 17, in clock ticks).
sshd_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($14 + $15) / hz }' "/proc/$1/stat"
}

# One scp upload (the client compresses; the server decompresses): MB/s, ssh's factor, and the
# CPU both ends spent per MB of input (client: scp and its ssh; server: the sshd session).
scp_run() { # key, label, port, file, compress (0/1), preload (0/1), adapt (0/1)
    local env=() opts=()
    [ "$5" = 1 ] && opts+=(-C)
    # The library names itself on stderr (scp.log), checked below.
    [ "$6" = 1 ] && env+=("LD_PRELOAD=$LIB" "ZIPWIRE_ZLIB_LOG=1")
    [ "$7" = 1 ] && env+=("ZIPWIRE_ZLIB_ADAPT=1")
    local size start end server_before server_after
    size=$(stat -c %s "$4")
    local scp=(ip netns exec "$NS_A" env "${env[@]}" "${CLIENT_CPU[@]}" scp -v "${opts[@]}" -P "$3"
        -i "$TMP/client_key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
        -o BatchMode=yes)
    failed() { echo "scp failed: $(tail -3 "$TMP/scp.log")" >&2; exit 1; }
    # The session's set-up (processes, key exchange, authentication): the median of three
    # uploads of one byte, the same way.
    local setups=() t0
    for _ in 1 2 3; do
        t0=$(date +%s.%N)
        "${scp[@]}" "$TMP/one.bin" "root@$IP_B:/dev/null" 2> "$TMP/scp.log" || failed
        setups+=("$(echo "$(date +%s.%N) - $t0" | bc -l)")
    done
    local setup
    setup=$(printf '%s\n' "${setups[@]}" | sort -g | sed -n 2p)
    sleep 0.5
    server_before=$(sshd_cpu "${SSHD_PID[$3]}")
    start=$(date +%s.%N)
    # Into a file, compared below: with the library on both ends its inflate checks its own
    # deflate, and ssh's MAC covers the compressed bytes only.
    rm -f "$TMP/received.bin"
    /usr/bin/time -f '%U %S' -o "$TMP/client.time" \
        "${scp[@]}" "$4" "root@$IP_B:$TMP/received.bin" 2> "$TMP/scp.log" || failed
    end=$(date +%s.%N)
    sleep 0.5 # the session's processes are reaped after scp returns
    server_after=$(sshd_cpu "${SSHD_PID[$3]}")
    cmp -s "$4" "$TMP/received.bin" || { echo "libz.sh: $2: the file arrived changed" >&2; exit 1; }
    if [ "$6" = 1 ] && ! grep -q '^zipwire-libz ' "$TMP/scp.log"; then
        # ld.so skips a library it cannot preload with a warning only: the row would be the
        # system zlib's.
        echo "libz.sh: $2: the client did not load $LIB" >&2
        exit 1
    fi
    rm -f "$TMP/received.bin"
    local factor mbs client server data
    # ssh -v: "compress outgoing: raw data R, compressed C, factor F"; F has two decimals, so
    # the factor is computed from R and C.
    factor=$(grep -o 'compress outgoing: raw data [0-9]*, compressed [0-9]*' "$TMP/scp.log" | tail -1 |
        awk '{ gsub(",", ""); if ($5 > 0) printf "%.3f", $7 / $5 }' || true)
    if [ "$5" = 1 ] && [ -z "$factor" ]; then
        # Taken as 1 (no compression), a lost line would make the ratio bar pass.
        echo "libz.sh: $2: ssh printed no compression figures" >&2
        exit 1
    fi
    mbs=$(echo "$size / ($end - $start) / 1000000" | bc -l)
    # After set-up: the transfer alone, the one-byte upload's time taken off.
    local xfer
    xfer=$(echo "d = $end - $start - $setup; if (d < 0.001) d = 0.001; $size / d / 1000000" | bc -l)
    client=$(awk -v mb="$size" '{ printf "%.2f", ($1 + $2) * 1000 / (mb / 1000000) }' "$TMP/client.time")
    server=$(echo "($server_after - $server_before) * 1000 / ($size / 1000000)" | bc -l)
    data=$(basename "$4" .bin)
    RESULT["$LINK|$data|$1|mbs"]=$mbs
    RESULT["$LINK|$data|$1|xfer"]=$xfer
    RESULT["$LINK|$data|$1|factor"]=${factor:-1}
    RESULT["$LINK|$data|$1|client"]=$client
    printf '%-12s %-11s %-31s %7.1f %7.1f %6.2f %7s %9s %9.2f\n' "$LINK" "$data" "$2" "$mbs" \
        "$xfer" "$setup" "${factor:--}" "$client" "$server"
}

# The issue's bar, from one link's rows: throughput against system zlib and plain scp, ratio
# (1/factor) against system zlib's, and the adaptive run against plain scp on compressed data.
bar_rows() { # link
    local l=$1
    ratio() { echo "${RESULT[$1]:-0} / ${RESULT[$2]:-1}" | bc -l; }
    printf '%-12s %-52s %6.2fx  (bar >= 4; after set-up %.2fx)\n' "$l" \
        "scp -C library / system zlib, large, MB/s" "$(ratio "$l|large|lib|mbs" "$l|large|zlib|mbs")" \
        "$(ratio "$l|large|lib|xfer" "$l|large|zlib|xfer")"
    printf '%-12s %-52s %6.2fx  (per core)\n' "$l" "client CPU per MB, system zlib / library, large" \
        "$(ratio "$l|large|zlib|client" "$l|large|lib|client")"
    printf '%-12s %-52s %6.2fx  (bar >= 0.9)\n' "$l" "ratio, library / system zlib, large" \
        "$(ratio "$l|large|zlib|factor" "$l|large|lib|factor")"
    printf '%-12s %-52s %6.2fx  (bar >= 1.5; after set-up %.2fx)\n' "$l" \
        "scp -C library / plain scp, large, MB/s" "$(ratio "$l|large|lib|mbs" "$l|large|plain|mbs")" \
        "$(ratio "$l|large|lib|xfer" "$l|large|plain|xfer")"
    printf '%-12s %-52s %6.2fx  (bar >= 0.9; after set-up %.2fx)\n' "$l" \
        "scp -C library adaptive / plain scp, compressed" \
        "$(ratio "$l|compressed|adapt|mbs" "$l|compressed|plain|mbs")" \
        "$(ratio "$l|compressed|adapt|xfer" "$l|compressed|plain|xfer")"
}

echo
echo "scp -C upload, $SIZE bytes of large/ ($((SIZE / 3)) of incompressible/), $(nproc) cores"
echo "(MB/s: the whole scp command; xfer: MB/s after set-up, the median time of three one-byte"
echo " uploads the same way (setup, s) taken off; client, server: CPU ms per MB of input, of"
echo " scp + ssh and of the sshd session)"
[ "$PIN" = 1 ] && echo "(PIN=1: client on core 0, server on core 1)"
printf '%-12s %-11s %-31s %7s %7s %6s %7s %9s %9s\n' link data method MB/s xfer setup factor client server
IFS=, read -ra links <<< "$LINKS"
LINK_NAMES=()
[[ ",$PARTS," == *,scp,* ]] || links=()
for mbit in "${links[@]}"; do
    set_link "$mbit"
    LINK=$([ "$mbit" = 0 ] && echo unshaped || echo "${mbit} Mbit/s")
    LINK_NAMES+=("$LINK")
    scp_run plain "scp (no compression)" 2201 "$TMP/large.bin" 0 0 0
    scp_run zlib "scp -C, system zlib both ends" 2201 "$TMP/large.bin" 1 0 0
    scp_run lib "scp -C, library both ends" 2202 "$TMP/large.bin" 1 1 0
    scp_run plain "scp (no compression)" 2201 "$TMP/compressed.bin" 0 0 0
    scp_run zlib "scp -C, system zlib both ends" 2201 "$TMP/compressed.bin" 1 0 0
    scp_run lib "scp -C, library both ends" 2202 "$TMP/compressed.bin" 1 1 0
    scp_run adapt "scp -C, library, adaptive" 2203 "$TMP/compressed.bin" 1 1 1
done

# --- nginx gzip: preloaded against the system zlib ----------------------------------------
PAGE="$CORPUS/web/haproxy-org-index.html"
mkdir -p "$TMP/www"
cp "$PAGE" "$TMP/www/index.html"
PAGE_SIZE=$(stat -c %s "$PAGE")
nginx_run() { # level, preload (0/1)
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat > "$TMP/nginx.conf" << CONF
user root; worker_processes 1; daemon off; pid $TMP/nginx.pid; error_log $TMP/nginx-error.log warn;
worker_rlimit_nofile 4096;
events { worker_connections 2048; }
http { access_log off; client_body_temp_path $TMP/body; proxy_temp_path $TMP/proxy;
  fastcgi_temp_path $TMP/fcgi; uwsgi_temp_path $TMP/uwsgi; scgi_temp_path $TMP/scgi;
  server { listen 127.0.0.1:$port backlog=4096; root $TMP/www; gzip on; gzip_comp_level $1;
           gzip_types *; gzip_min_length 0; } }
CONF
    local env=()
    [ "$2" = 1 ] && env+=("LD_PRELOAD=$LIB")
    env "${env[@]}" taskset -c "$NGINX_CPU" nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/nginx-error.log" &
    local pid=$!
    PIDS+=("$pid")
    sleep 1
    if [ "$2" = 1 ] && ! grep -qF "$(realpath "$LIB")" "/proc/$pid/maps" 2> /dev/null; then
        # ld.so skips a library it cannot preload with a warning only: the row would be the
        # system zlib's twice.
        echo "libz.sh: nginx did not load $LIB" >&2
        exit 1
    fi
    local gz
    # The body must be gzip and decode to the page: a library that ended its streams early
    # would otherwise score a better ratio and more hits.
    curl -s -D "$TMP/nginx.head" -o "$TMP/nginx.body" -H 'Accept-Encoding: gzip' \
        "http://127.0.0.1:$port/" || true
    if ! grep -qi '^content-encoding: *gzip' "$TMP/nginx.head" ||
        ! gzip -dc "$TMP/nginx.body" 2> /dev/null | cmp -s - "$TMP/www/index.html"; then
        echo "libz.sh: nginx level $1 ($([ "$2" = 1 ] && echo library || echo system zlib)):" \
            "the gzip body does not decode to the page" >&2
        exit 1
    fi
    gz=$(stat -c %s "$TMP/nginx.body")
    local out
    out=$(ulimit -n 4096; taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 10s \
        -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/" 2>&1 || true)
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    # Reaped: not to be signalled again at exit, when the number may be another process's.
    local kept=() p
    for p in "${PIDS[@]}"; do [ "$p" = "$pid" ] || kept+=("$p"); done
    PIDS=("${kept[@]}")
    local rps alerts key
    # Only answers that were not errors count as hits: wrk's Requests/sec counts them all.
    rps=$(echo "$out" | awk '
        / requests in / { total = $1 }
        /Requests\/sec/ { rate = $2 }
        /Non-2xx or 3xx responses/ { bad = $NF }
        END { if (total > 0 && rate > 0) printf "%.2f", rate * (total - bad) / total }')
    if echo "$out" | grep -qE 'Non-2xx|Socket errors'; then
        echo "note: nginx level $1: $(echo "$out" | grep -E 'Non-2xx|Socket errors' | xargs)" >&2
    fi
    key="nginx|$1|$([ "$2" = 1 ] && echo lib || echo zlib)"
    RESULT["$key|rps"]=${rps:-0}
    RESULT["$key|bytes"]=$gz
    alerts=$(grep -c '\[alert\]' "$TMP/nginx-error.log" 2> /dev/null || true)
    printf '%-6s %-14s %10s %8s %8.3f %7s\n' "$1" "$([ "$2" = 1 ] && echo library || echo system zlib)" \
        "${rps:--}" "$gz" "$(echo "$PAGE_SIZE / $gz" | bc -l)" "${alerts:-0}"
    grep '\[alert\]' "$TMP/nginx-error.log" | head -3 | sed 's/^/  note: /' >&2 || true
    : > "$TMP/nginx-error.log"
}
echo
echo "nginx gzip, haproxy-org-index.html ($PAGE_SIZE bytes), $CONNS connections, ${DURATION}s, one core"
printf '%-6s %-14s %10s %8s %8s %7s\n' level zlib hits/s bytes ratio alerts
levels=(1 6)
[[ ",$PARTS," == *,nginx,* ]] || levels=()
for level in "${levels[@]}"; do
    nginx_run "$level" 0
    nginx_run "$level" 1
done

echo
echo "against the bar (issue 25)"
for l in "${LINK_NAMES[@]}"; do bar_rows "$l"; done
if [ ${#levels[@]} -gt 0 ]; then
    printf '%-12s %-52s %6.2fx  (bar >= 2)\n' nginx "gzip level 1, library / system zlib, hits/s" \
        "$(echo "${RESULT[nginx|1|lib|rps]:-0} / ${RESULT[nginx|1|zlib|rps]:-1}" | bc -l)"
    printf '%-12s %-52s %6.2fx  (bar >= 0.95)\n' nginx "gzip level 1, ratio, library / system zlib" \
        "$(echo "${RESULT[nginx|1|zlib|bytes]:-0} / ${RESULT[nginx|1|lib|bytes]:-1}" | bc -l)"
fi
