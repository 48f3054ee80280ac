#!/usr/bin/env bash
# bench/proxy.sh: zipwire against HAProxy (slz), nginx (gzip level 1) and Caddy (encode gzip)
# as compressing reverse proxies, side by side and one at a time.
#
# One static origin (nginx, gzip off) serves $ZIPWIRE_CORPUS/web on loopback. Each proxy in
# turn sits in front of it, pinned to one core (PROXY_CPU), and wrk on another core
# (LOAD_CPU) sends `Accept-Encoding: gzip` GETs with each connection count, for
# web/haproxy-org-index.html and for the mix of every file in web/. See bench/README.md.
#
# MODE=cache: compress once, serve many: zipwire's cache (both modes) against Varnish,
# HAProxy+slz with and without its cache and nginx proxy_cache, the origin sending
# `expires 1h` and ETags (bench/proxy-cache.sh; needs varnish and brotli).
#
# MODE=idle: what each proxy holds per idle keep-alive client connection: IDLE_CONNS clients
# fetch haproxy-org-index.html once each and stay connected (bench/proxy-idle.sh).
#
# MODE=h2: the same origin behind each proxy as a TLS 1.3 + HTTP/2 edge (a self-signed
# certificate made here with openssl), loaded by h2load with CLIENTS connections of STREAMS
# streams each for haproxy-org-index.html, gzip asked of every proxy and zstd also of Caddy
# and zipwire. A proxy that does not start, does not compress or fails requests fails the run.
#
# Environment (defaults in brackets):
#   MODE [http1]             http1: wrk over cleartext HTTP/1.1; h2: h2load over TLS + HTTP/2;
#                            idle: memory per idle client connection; cache: see above
#   IDLE_CONNS [2000]        MODE=idle only: client connections held open
#   CLIENTS [100]  STREAMS [10]   MODE=h2 only: h2load -c and -m (CONNS and FILES unused)
#   DURATION [10]            seconds per wrk run
#   ROUNDS [3]               MODE=http1 and h2: rounds, each starting one proxy later in
#                            PROXIES; the verdicts use the median of the per-round ratios
#   CONNS ["300 500"]        connection counts
#   PROXIES ["haproxy nginx caddy zipwire"]; also zipwire-admin (the admin listener and its
#                            dashboard on, nobody watching) and zipwire-viewer (the same with
#                            one dashboard viewer, an event-stream client on LOAD_CPU)
#   ADMIN_PORT [PROXY_PORT + 2]  the admin listener of zipwire-admin and zipwire-viewer
#   FILES ["single mix"]     single: haproxy-org-index.html; mix: every file in web/
#   ZIPWIRE_CORPUS [../shared/corpus from the repository root]
#   ZIPWIRE [target/release/zipwire]   ZIPWIRE_LEVEL [2, the proxy's default]
#   PROXY_CPU [0]  LOAD_CPU [1]  ORIGIN_CPU [LOAD_CPU]
#   ORIGIN_PORT [18080]  PROXY_PORT [18081]
#   TSV [unset]              also append the rows, tab-separated, to this file
#   PLOT [proxy.svg]         draw hits/s and ratio per proxy here (zipwire bench plot), its
#                            rows beside it in the same name ending .tsv; PLOT= for none
#
# Needs root only to install missing tools (apt-get: nginx haproxy caddy wrk curl; MODE=h2
# also nghttp2-client openssl zstd).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONF=$ROOT/bench/conf
CORPUS=${ZIPWIRE_CORPUS:-$ROOT/../shared/corpus}
WEB=$CORPUS/web
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-"300 500"}
PROXIES=${PROXIES:-"haproxy nginx caddy zipwire"}
FILES=${FILES:-"single mix"}
ZIPWIRE=${ZIPWIRE:-$ROOT/target/release/zipwire}
ZIPWIRE_LEVEL=${ZIPWIRE_LEVEL:-2}
# Which build is measured: the commit, and a warning when a source is newer than the binary
# (the table would be another commit's).
if [ -x "$ZIPWIRE" ]; then
    echo "# zipwire: $ZIPWIRE, tree at $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '(no git)')"
    if [ -n "$(find "$ROOT/crates" -name '*.rs' -newer "$ZIPWIRE" -print -quit 2>/dev/null)" ]; then
        echo "warning: $ZIPWIRE is older than the sources: cargo build --release -p zipwire" >&2
    fi
fi
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
ORIGIN_CPU=${ORIGIN_CPU:-$LOAD_CPU}
ORIGIN_PORT=${ORIGIN_PORT:-18080}
PROXY_PORT=${PROXY_PORT:-18081}
ADMIN_PORT=${ADMIN_PORT:-$((PROXY_PORT + 2))}
MODE=${MODE:-http1}
CLIENTS=${CLIENTS:-100}
STREAMS=${STREAMS:-10}
SINGLE=haproxy-org-index.html

die() {
    echo "proxy.sh: $*" >&2
    exit 1
}

if ! [[ $DURATION =~ ^[0-9]+$ ]] || ((DURATION < 1 || DURATION > 600)); then
    die "DURATION must be 1-600 seconds"
fi
[ -d "$WEB" ] || die "no corpus at $WEB (set ZIPWIRE_CORPUS)"
[ -f "$WEB/$SINGLE" ] || die "$WEB/$SINGLE is missing"
case $MODE in
    http1) load_tools="wrk" ;;
    h2)
        load_tools="h2load openssl zstd"
        [[ $CLIENTS =~ ^[0-9]+$ && $STREAMS =~ ^[0-9]+$ ]] && ((CLIENTS >= 1 && STREAMS >= 1)) ||
            die "CLIENTS and STREAMS must be positive integers"
        ;;
    cache) load_tools="wrk varnishd brotli" ;;
    idle)
        load_tools="python3"
        IDLE_CONNS=${IDLE_CONNS:-2000}
        [[ $IDLE_CONNS =~ ^[0-9]+$ ]] && ((IDLE_CONNS >= 2 && IDLE_CONNS <= 3000)) ||
            die "IDLE_CONNS must be 2-3000 (HAProxy's config allows 4,000 connections)"
        ;;
    *) die "MODE must be http1, h2, cache or idle" ;;
esac

# --- tools -----------------------------------------------------------------------------
missing=()
for tool in nginx haproxy caddy curl taskset $load_tools; do
    if ! command -v "$tool" > /dev/null && ! [ -x "/usr/sbin/$tool" ]; then
        missing+=("$tool")
    fi
done
if ((${#missing[@]})); then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
        die "missing ${missing[*]}; install them (Debian: apt-get install nginx haproxy caddy wrk curl; MODE=h2: nghttp2-client openssl zstd)"
    fi
    echo "installing ${missing[*]} with apt-get"
    packages=()
    for tool in "${missing[@]}"; do
        case $tool in
            taskset) packages+=(util-linux) ;;
            h2load) packages+=(nghttp2-client) ;;
            varnishd) packages+=(varnish) ;;
            *) packages+=("$tool") ;;
        esac
    done
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${packages[@]}" > /dev/null
fi
PATH=$PATH:/usr/sbin

cpus=$(nproc)
((PROXY_CPU < cpus && LOAD_CPU < cpus && ORIGIN_CPU < cpus)) ||
    die "this machine has $cpus CPUs; set PROXY_CPU, LOAD_CPU, ORIGIN_CPU below that"
((PROXY_CPU != LOAD_CPU)) || echo "warning: proxy and the load share CPU $PROXY_CPU" >&2

# wrk and the proxies hold one descriptor per connection, twice for a proxy.
ulimit -n "$(ulimit -Hn)"

zipwire_ok=0
# MODE=cache runs CACHE_PROXIES (zipwire's rows among them by default), not PROXIES, so
# zipwire is checked whenever MODE=cache, whatever PROXIES names.
if [ "$MODE" = cache ] || [[ " $PROXIES " =~ " zipwire"(-admin|-viewer)?" " ]]; then
    if "$ZIPWIRE" proxy --help > /dev/null 2>&1; then
        zipwire_ok=1
    else
        echo "note: skipping zipwire: '$ZIPWIRE proxy --help' fails" \
            "(build it: cargo build --release -p zipwire)" >&2
    fi
fi

# --- the plan, up front ----------------------------------------------------------------
paths_mix=()
for file in "$WEB"/*; do
    [ -f "$file" ] && paths_mix+=("/$(basename "$file")")
done
# The codings MODE=h2 asks of each proxy: gzip of all; zstd of those that offer it.
h2_codings() {
    case $1 in
        caddy | zipwire) echo "gzip zstd" ;;
        *) echo "gzip" ;;
    esac
}
runs=0
for proxy in $PROXIES; do
    [[ $proxy == zipwire* ]] && ((zipwire_ok == 0)) && continue
    if [ "$MODE" = h2 ]; then
        for _ in $(h2_codings "$proxy"); do
            runs=$((runs + 1))
        done
        continue
    fi
    for _ in $FILES; do
        for _ in $CONNS; do
            runs=$((runs + 1))
        done
    done
done
# Each run: proxy start and check (~1-2 s), the load for DURATION, log flush (~1.5 s).
estimate=$((runs * (DURATION + 4) + 3))
if [ "$MODE" = idle ]; then
    echo "proxy.sh MODE=idle: $IDLE_CONNS idle client connections per proxy (proxies: $PROXIES)"
elif [ "$MODE" = h2 ]; then
    echo "proxy.sh MODE=h2: $runs runs of ${DURATION}s (proxies: $PROXIES; $SINGLE;" \
        "h2load -c$CLIENTS -m$STREAMS over TLS 1.3), about ${estimate}s in all"
else
    echo "proxy.sh: $runs runs of ${DURATION}s (proxies: $PROXIES; files: $FILES; conns: $CONNS)," \
        "about ${estimate}s in all"
fi
echo "proxy on CPU $PROXY_CPU, load on CPU $LOAD_CPU, origin on CPU $ORIGIN_CPU; corpus $WEB"

# --- processes and cleanup -------------------------------------------------------------
WORK=$(mktemp -d /tmp/zipwire-bench.XXXXXX)
mkdir -p "$WORK"/origin-tmp "$WORK"/nginx-tmp "$WORK"/caddy "$WORK"/tls
ORIGIN_PID=
PROXY_PID=
VIEWER_PID=

stop_pid() {
    local pid=$1
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2> /dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$pid" 2> /dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2> /dev/null || true
}

cleanup() {
    stop_pid "$VIEWER_PID"
    stop_pid "$PROXY_PID"
    stop_pid "$ORIGIN_PID"
    wait 2> /dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Fills the @NAME@ placeholders of a config template.
render() {
    local user_directive=""
    [ "$(id -u)" = 0 ] && user_directive="user root;"
    sed -e "s|@WORK@|$WORK|g" -e "s|@WEB@|$WEB|g" \
        -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@PROXY_PORT@|$PROXY_PORT|g" \
        -e "s|@USER_DIRECTIVE@|$user_directive|g" "$CONF/$1" > "$WORK/$1"
}

# Waits until ${2:-http}://127.0.0.1:$1/ answers, or fails after 10 s.
wait_http() {
    for _ in $(seq 100); do
        curl -sk -o /dev/null "${2:-http}://127.0.0.1:$1/$SINGLE" && return 0
        sleep 0.1
    done
    return 1
}

port_free() {
    ! (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null
}

start_origin() {
    port_free "$ORIGIN_PORT" || die "port $ORIGIN_PORT is in use (set ORIGIN_PORT)"
    local conf=origin-nginx.conf
    [ "$MODE" = cache ] && conf=origin-nginx-cache.conf
    render "$conf"
    taskset -c "$ORIGIN_CPU" nginx -p "$WORK" -c "$WORK/$conf" -g 'daemon off;' \
        2> "$WORK/origin.stderr" &
    ORIGIN_PID=$!
    wait_http "$ORIGIN_PORT" || die "origin did not start: $(cat "$WORK"/origin*.log "$WORK/origin.stderr")"
}

start_proxy() {
    port_free "$PROXY_PORT" || die "port $PROXY_PORT is in use (set PROXY_PORT)"
    local cpu=$PROXY_CPU suffix="" scheme=http
    if [ "$MODE" = h2 ]; then
        suffix=-h2 scheme=https
    fi
    case $1 in
        haproxy)
            render "haproxy$suffix.cfg"
            taskset -c "$cpu" haproxy -db -f "$WORK/haproxy$suffix.cfg" > "$WORK/proxy.log" 2>&1 &
            ;;
        nginx)
            render "nginx$suffix.conf"
            taskset -c "$cpu" nginx -p "$WORK" -c "$WORK/nginx$suffix.conf" -g 'daemon off;' \
                > "$WORK/proxy.log" 2>&1 &
            ;;
        caddy)
            render "Caddyfile$suffix"
            XDG_DATA_HOME=$WORK/caddy XDG_CONFIG_HOME=$WORK/caddy GOMAXPROCS=1 \
                taskset -c "$cpu" caddy run --config "$WORK/Caddyfile$suffix" --adapter caddyfile \
                > "$WORK/proxy.log" 2>&1 &
            ;;
        zipwire | zipwire-admin | zipwire-viewer)
            # No access log, like the others here (nginx: access_log off; HAProxy and Caddy:
            # none configured). MODE=h2: TLS on PROXY_PORT, cleartext one port above (unused).
            local listen=("--listen" "127.0.0.1:$PROXY_PORT")
            if [ "$MODE" = h2 ]; then
                listen=("--listen" "127.0.0.1:$((PROXY_PORT + 1))"
                    "--tls-listen" "127.0.0.1:$PROXY_PORT"
                    "--tls-cert" "$WORK/tls/cert.pem" "--tls-key" "$WORK/tls/key.pem"
                    "--encodings" "zstd,br,gzip")
            fi
            [ "$1" = zipwire ] || listen+=("--admin" "127.0.0.1:$ADMIN_PORT")
            taskset -c "$cpu" "$ZIPWIRE" proxy "${listen[@]}" \
                --upstream "http://127.0.0.1:$ORIGIN_PORT" --threads 1 --level "$ZIPWIRE_LEVEL" \
                --no-access-log > "$WORK/proxy.log" 2>&1 &
            ;;
        *) die "unknown proxy $1" ;;
    esac
    PROXY_PID=$!
    if ! wait_http "$PROXY_PORT" "$scheme"; then
        echo "warning: $1 did not start:" >&2
        tail -5 "$WORK/proxy.log" >&2
        stop_proxy
        return 1
    fi
    [ "$1" = zipwire-viewer ] && start_viewer
    return 0
}

# One viewer of zipwire's dashboard: an event-stream client on LOAD_CPU that receives what
# the page's EventSource would, once a second. (A headless browser drawing the charts would
# also take LOAD_CPU from wrk, which is not the proxy's cost.)
start_viewer() {
    taskset -c "$LOAD_CPU" curl -sN -o "$WORK/viewer.events" \
        "http://127.0.0.1:$ADMIN_PORT/events" &
    VIEWER_PID=$!
    for _ in $(seq 30); do
        viewer_watching && return 0
        sleep 0.1
    done
    die "the viewer did not get the dashboard's first event"
}

# True once the viewer has received a whole event (`data:` lines, then an empty line).
viewer_watching() {
    grep -q '^$' "$WORK/viewer.events" 2> /dev/null
}

stop_proxy() {
    stop_pid "$VIEWER_PID"
    VIEWER_PID=
    stop_pid "$PROXY_PID"
    wait "$PROXY_PID" 2> /dev/null || true
    PROXY_PID=
}

# Checks that the proxy compresses the single file and that it decodes to the original;
# fails (and the row says FAILED) when not: its figures would not be a compressing proxy's.
check_proxy() {
    local headers=$WORK/check.headers body=$WORK/check.body
    curl -s -D "$headers" -o "$body" -H 'Accept-Encoding: gzip' \
        "http://127.0.0.1:$PROXY_PORT/$SINGLE" || true
    if ! grep -qi '^content-encoding: *gzip' "$headers"; then
        echo "warning: $1 did not compress $SINGLE" >&2
        return 1
    elif ! gzip -dc < "$body" | cmp -s - "$WEB/$SINGLE"; then
        echo "warning: $1 sent a body that does not decode to $SINGLE" >&2
        return 1
    fi
}

# Peak resident memory (VmHWM) of a process and its descendants, in KiB.
peak_rss_kib() {
    local total=0 pid kib
    local pids=("$1")
    local i=0
    while ((i < ${#pids[@]})); do
        pid=${pids[i]}
        kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2> /dev/null || true)
        total=$((total + ${kib:-0}))
        # shellcheck disable=SC2013 # the files hold space-separated PIDs
        for child in $(cat "/proc/$pid/task/"*/children 2> /dev/null); do
            pids+=("$child")
        done
        i=$((i + 1))
    done
    echo "$total"
}

# Bytes the origin has logged so far (the access log is flushed once a second).
origin_bytes() {
    awk '{ s += $1 } END { printf "%.0f\n", s }' "$WORK/origin-access.log" 2> /dev/null || echo 0
}

ROWS=()
row() {
    local IFS=$'\t'
    ROWS+=("$*")
}
row proxy conns file hits/s "BW in" "BW out" "BW saved" ratio RSS

# One wrk run against the proxy; adds a table row.
measure() {
    local proxy=$1 conns=$2 files=$3 label paths
    if [ "$files" = single ]; then
        label=$SINGLE
        paths="/$SINGLE"
    else
        label="mix (${#paths_mix[@]} files)"
        paths="${paths_mix[*]}"
    fi
    if ! start_proxy "$proxy"; then
        row "$proxy" "$conns" "$label" "did not start" - - - - -
        return
    fi
    if ! check_proxy "$proxy"; then
        stop_proxy
        row "$proxy" "$conns" "$label" FAILED - - - - -
        return
    fi
    sleep 1.2 # the origin flushes its access log each second
    local in_before
    in_before=$(origin_bytes)
    local out
    out=$(ZW_PATHS=$paths timeout $((DURATION + 30)) taskset -c "$LOAD_CPU" \
        wrk -t1 -c"$conns" -d"${DURATION}s" --timeout 10s -H 'Accept-Encoding: gzip' \
        -s "$CONF/wrk.lua" "http://127.0.0.1:$PROXY_PORT/" 2>&1) || true
    local rss
    if ! kill -0 "$PROXY_PID" 2> /dev/null; then
        # Gone during the load: its hits are no figure, and its memory would read as none.
        echo "warning: $proxy exited during the load" >&2
        stop_proxy
        row "$proxy" "$conns" "$label" FAILED - - - - -
        return
    fi
    rss=$(peak_rss_kib "$PROXY_PID")
    if [ -n "$VIEWER_PID" ]; then
        local events
        events=$(grep -c '^$' "$WORK/viewer.events" || true)
        ((events >= DURATION)) || echo "warning: the viewer got $events events in ${DURATION}s" >&2
    fi
    stop_proxy
    sleep 1.5
    local in_after
    in_after=$(origin_bytes)
    local summary
    summary=$(grep '^zipwire-bench ' <<< "$out" || true)
    if [ -z "$summary" ]; then
        echo "warning: wrk failed for $proxy, $conns conns, $label:" >&2
        echo "$out" | tail -5 >&2
        row "$proxy" "$conns" "$label" - - - - - -
        return
    fi
    # "zipwire-bench requests=N bytes=N duration_us=N socket_errors=N status_errors=N"
    local requests bytes duration_us socket_errors status_errors
    read -r requests bytes duration_us socket_errors status_errors \
        <<< "$(sed -E -e 's/^zipwire-bench //' -e 's/[a-z_]+=//g' <<< "$summary")"
    if ((socket_errors + status_errors > 0)); then
        echo "note: $proxy, $conns conns, $label: $socket_errors socket errors," \
            "$status_errors non-2xx/3xx responses (not counted as hits)" >&2
    fi
    # A proxy answering errors fast must not score them as hits.
    requests=$((requests - status_errors))
    local bytes_in=$((in_after - in_before))
    local numbers
    numbers=$(awk -v r="$requests" -v bout="$bytes" -v bin="$bytes_in" \
        -v us="$duration_us" -v rss="$rss" 'BEGIN {
            s = us / 1e6; mib = 1024 * 1024
            printf "%.0f %.1fMiB/s %.1fMiB/s %.1f%% %.2f %.1fMiB\n",
                r / s, bin / s / mib, bout / s / mib,
                (bin > 0 ? 100 * (1 - bout / bin) : 0), (bout > 0 ? bin / bout : 0), rss / 1024
        }')
    local cells
    read -r -a cells <<< "$numbers"
    row "$proxy" "$conns" "$label" "${cells[@]}"
}

# Writes the rows (its argument: the array's name) to ${PLOT%.svg}.tsv and draws $PLOT.
plot_rows() {
    local -n plotted=$1
    [ -n "${PLOT-proxy.svg}" ] || return 0
    local svg=${PLOT-proxy.svg}
    if ! "$ZIPWIRE" bench plot --help > /dev/null 2>&1; then
        echo "plot: skipped, '$ZIPWIRE bench plot' is missing (cargo build --release -p zipwire)"
        return 0
    fi
    printf '%s\n' "${plotted[@]}" > "${svg%.svg}.tsv"
    "$ZIPWIRE" bench plot proxy "${svg%.svg}.tsv" -o "$svg" --title "bench/proxy.sh ($MODE)"
}

start_origin
started=$SECONDS
if [ "$MODE" = h2 ]; then
    # shellcheck source=bench/proxy-h2.sh
    . "$ROOT/bench/proxy-h2.sh"
    h2_main
    exit 0
fi
if [ "$MODE" = idle ]; then
    # shellcheck source=bench/proxy-idle.sh
    . "$ROOT/bench/proxy-idle.sh"
    ROWS=()
    row proxy clients "RSS, one" "RSS, all" "bytes per connection"
    idle_main
    echo "($((SECONDS - started))s)"
    exit 0
fi
if [ "$MODE" = cache ]; then
    # shellcheck source=bench/proxy-cache.sh
    . "$ROOT/bench/proxy-cache.sh"
    cache_main
    echo "($((SECONDS - started))s)"
    exit 0
fi
declare -A HITS=()
read -r -a order <<< "$PROXIES"
for ((round = 0; round < ROUNDS; round++)); do
    # Each round starts one proxy later, so that none is always measured first or last.
    k=$((round % ${#order[@]}))
    for proxy in "${order[@]:k}" "${order[@]:0:k}"; do
        if [[ $proxy == zipwire* ]] && ((zipwire_ok == 0)); then
            continue
        fi
        for files in $FILES; do
            for conns in $CONNS; do
                echo "  round $((round + 1)): $proxy, $files, $conns connections" >&2
                measure "$proxy" "$conns" "$files"
                HITS["$round|$proxy|$files|$conns"]=$(tail -1 <<< "${ROWS[-1]}" | cut -f4)
            done
        done
    done
done

echo
echo "BW in: bytes the origin sent (headers and bodies); BW out: bytes wrk read from the proxy;"
echo "ratio: in/out; RSS: peak resident memory of the proxy (all its processes); ${DURATION}s per run."
printf '%s\n' "${ROWS[@]}" | column -t -s $'\t' -o ' | '
# Each proxy's hits/s against HAProxy's of the same round: the median of those ratios, and
# their spread (the rounds alternate, so that drift on the machine hits both alike).
if [[ " $PROXIES " == *" haproxy "* ]]; then
    echo
    echo "hits/s against HAProxy's in the same round (median of $ROUNDS; lowest-highest):"
    for proxy in $PROXIES; do
        [ "$proxy" != haproxy ] || continue
        for files in $FILES; do
            for conns in $CONNS; do
                for ((round = 0; round < ROUNDS; round++)); do
                    echo "${HITS["$round|$proxy|$files|$conns"]:--} ${HITS["$round|haproxy|$files|$conns"]:--}"
                done | awk -v label="$proxy, $files, $conns conns" '
                    $1 ~ /^[0-9.]+$/ && $2 ~ /^[0-9.]+$/ && $2 > 0 { r[++n] = $1 / $2 }
                    END {
                        if (n == 0) { printf "  %-40s -\n", label; exit }
                        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                            if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
                        m = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
                        printf "  %-40s %.2fx (%.2f-%.2f, %d rounds)\n", label, m, r[1], r[n], n
                    }'
            done
        done
    done
fi
if [[ " $PROXIES " =~ " zipwire"(-admin|-viewer)?" " ]] && ((zipwire_ok == 0)); then
    echo "zipwire: skipped, '$ZIPWIRE proxy --help' fails (cargo build --release -p zipwire)"
fi
if [ -n "${TSV:-}" ]; then
    printf '%s\n' "${ROWS[@]}" >> "$TSV"
fi
plot_rows ROWS
echo "($((SECONDS - started))s)"
