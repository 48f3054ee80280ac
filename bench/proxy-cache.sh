# bench/proxy-cache.sh: MODE=cache of bench/proxy.sh, sourced by it after its helpers are
# defined (start_origin, render, wait_http, stop_proxy, peak_rss_kib, row). Compress once,
# serve many: zipwire's cache in both modes against Varnish (compresses once, gzip level 9),
# HAProxy+slz with and without its cache, and nginx proxy_cache + gzip level 6. The origin
# sends `Cache-Control: max-age=3600` and an ETag (conf/origin-nginx-cache.conf).
#
# Each proxy is warmed up first (every path fetched with gzip, br and no coding), then left
# WARMUP seconds for zipwire's background recompression; the ratio is the bodies' (original
# bytes / compressed bytes, measured with curl after the warm-up), not the BW ratio, since a
# cache reads nothing from the origin during the run. hits/s and RSS as in proxy.sh.
#
# Environment, besides proxy.sh's (DURATION, CONNS, FILES, PROXY_CPU, LOAD_CPU...):
#   CACHE_PROXIES ["varnish haproxy haproxy-cache nginx-cache zipwire-revalidate zipwire-fresh"]
#   WARMUP [40]   seconds left to zipwire's recompression after the warm-up requests

CACHE_PROXIES=${CACHE_PROXIES:-"varnish haproxy haproxy-cache nginx-cache zipwire-revalidate zipwire-fresh"}
WARMUP=${WARMUP:-40}

# Starts one proxy of MODE=cache on PROXY_PORT, pinned to PROXY_CPU.
start_cache_proxy() {
    port_free "$PROXY_PORT" || die "port $PROXY_PORT is in use (set PROXY_PORT)"
    local cpu=$PROXY_CPU
    case $1 in
        varnish)
            render varnish.vcl
            # -j none: no privilege separation, so it can read the work directory (0700).
            taskset -c "$cpu" varnishd -F -j none -n "$WORK/varnish" \
                -a "127.0.0.1:$PROXY_PORT" -f "$WORK/varnish.vcl" -s malloc,128m \
                -p gzip_level=9 -p thread_pools=1 > "$WORK/proxy.log" 2>&1 &
            ;;
        haproxy)
            render haproxy.cfg
            taskset -c "$cpu" haproxy -db -f "$WORK/haproxy.cfg" > "$WORK/proxy.log" 2>&1 &
            ;;
        haproxy-cache)
            render haproxy-cache.cfg
            taskset -c "$cpu" haproxy -db -f "$WORK/haproxy-cache.cfg" > "$WORK/proxy.log" 2>&1 &
            ;;
        nginx-cache)
            render nginx-cache.conf
            rm -rf "$WORK/nginx-cache"
            mkdir -p "$WORK/nginx-cache"
            taskset -c "$cpu" nginx -p "$WORK" -c "$WORK/nginx-cache.conf" -g 'daemon off;' \
                > "$WORK/proxy.log" 2>&1 &
            ;;
        zipwire-revalidate | zipwire-fresh)
            cat > "$WORK/zipwire.toml" <<EOF
listen = "127.0.0.1:$PROXY_PORT"
upstreams = ["http://127.0.0.1:$ORIGIN_PORT"]
threads = 1
access_log = false
[compression]
level = $ZIPWIRE_LEVEL
[cache]
mode = "${1#zipwire-}"
EOF
            taskset -c "$cpu" "$ZIPWIRE" proxy --config "$WORK/zipwire.toml" \
                > "$WORK/proxy.log" 2>&1 &
            ;;
        *) die "unknown proxy $1" ;;
    esac
    PROXY_PID=$!
    if ! wait_http "$PROXY_PORT"; then
        echo "warning: $1 did not start:" >&2
        tail -5 "$WORK/proxy.log" >&2
        stop_proxy
        return 1
    fi
}

# Fetches every path with each coding (the warm-up), then prints the body ratio for gzip and
# for br (original bytes / compressed bytes over all paths; "-" when not compressed), and
# warns about a body that does not decode to the original.
cache_ratios() {
    local proxy=$1
    shift
    local path coding original gz=0 br=0 plain=0 broken=0 body=$WORK/check.body headers=$WORK/check.headers
    for coding in gzip br identity; do
        for path in "$@"; do
            curl -s -o /dev/null -H "Accept-Encoding: $coding" "http://127.0.0.1:$PROXY_PORT$path"
        done
    done
    [[ $proxy == zipwire-* ]] && sleep "$WARMUP"
    for path in "$@"; do
        original=$(stat -c %s "$WEB$path")
        plain=$((plain + original))
        for coding in gzip br; do
            curl -s -D "$headers" -o "$body" -H "Accept-Encoding: $coding" \
                "http://127.0.0.1:$PROXY_PORT$path"
            if grep -qi "^content-encoding: *$coding" "$headers"; then
                local decoded=$WORK/check.decoded
                if [ "$coding" = gzip ]; then
                    gzip -dc < "$body" > "$decoded" 2> /dev/null || true
                else
                    brotli -dc < "$body" > "$decoded" 2> /dev/null || true
                fi
                if ! cmp -s "$decoded" "$WEB$path"; then
                    echo "warning: $proxy: $path in $coding does not decode to the original" >&2
                    broken=1
                fi
                local size
                size=$(stat -c %s "$body")
                if [ "$coding" = gzip ]; then gz=$((gz + size)); else br=$((br + size)); fi
            else
                if [ "$coding" = gzip ]; then gz=$((gz + original)); else br=$((br + original)); fi
            fi
        done
    done
    # A body that does not decode is no ratio: the row fails, as proxy.sh's http1 mode does.
    if [ "$broken" = 1 ]; then
        echo "FAILED FAILED"
        return
    fi
    awk -v p="$plain" -v g="$gz" -v b="$br" 'BEGIN {
        printf "%.2f %.2f\n", (g > 0 ? p / g : 0), (b > 0 ? p / b : 0)
    }'
}

# One wrk run against a warmed-up cache; adds a table row.
cache_measure() {
    local proxy=$1 conns=$2 files=$3 label paths
    if [ "$files" = single ]; then
        label=$SINGLE
        paths=("/$SINGLE")
    else
        label="mix (${#paths_mix[@]} files)"
        paths=("${paths_mix[@]}")
    fi
    if ! start_cache_proxy "$proxy"; then
        row "$proxy" "$conns" "$label" "did not start" - - - -
        return
    fi
    local ratios
    read -r -a ratios <<< "$(cache_ratios "$proxy" "${paths[@]}")"
    if [ "${ratios[0]}" = FAILED ]; then
        stop_proxy
        row "$proxy" "$conns" "$label" FAILED - - - -
        return
    fi
    local out
    out=$(ZW_PATHS="${paths[*]}" timeout $((DURATION + 30)) taskset -c "$LOAD_CPU" \
        wrk -t1 -c"$conns" -d"${DURATION}s" --timeout 10s -H 'Accept-Encoding: gzip' \
        -s "$CONF/wrk.lua" "http://127.0.0.1:$PROXY_PORT/" 2>&1) || true
    if ! kill -0 "$PROXY_PID" 2> /dev/null; then
        # Gone during the load: its hits are no figure, and its memory would read as none.
        echo "warning: $proxy exited during the load" >&2
        stop_proxy
        row "$proxy" "$conns" "$label" FAILED - - - -
        return
    fi
    local rss
    rss=$(peak_rss_kib "$PROXY_PID")
    stop_proxy
    local summary
    summary=$(grep '^zipwire-bench ' <<< "$out" || true)
    if [ -z "$summary" ]; then
        echo "warning: wrk failed for $proxy, $conns conns, $label:" >&2
        echo "$out" | tail -5 >&2
        row "$proxy" "$conns" "$label" - - - - -
        return
    fi
    local requests bytes duration_us socket_errors status_errors
    read -r requests bytes duration_us socket_errors status_errors \
        <<< "$(sed -E -e 's/^zipwire-bench //' -e 's/[a-z_]+=//g' <<< "$summary")"
    if ((socket_errors + status_errors > 0)); then
        echo "note: $proxy, $conns conns, $label: $socket_errors socket errors," \
            "$status_errors non-2xx/3xx responses (not counted as hits)" >&2
    fi
    # A cache answering errors fast must not score them as hits (as proxy.sh's http1 mode).
    requests=$((requests - status_errors))
    local numbers
    numbers=$(awk -v r="$requests" -v bout="$bytes" -v us="$duration_us" -v rss="$rss" 'BEGIN {
        s = us / 1e6; printf "%.0f %.1fMiB/s %.1fMiB\n", r / s, bout / s / 1048576, rss / 1024
    }')
    local cells
    read -r -a cells <<< "$numbers"
    row "$proxy" "$conns" "$label" "${cells[0]}" "${cells[1]}" "${ratios[0]}" "${ratios[1]}" \
        "${cells[2]}"
}

cache_main() {
    ROWS=()
    row proxy conns file hits/s "BW out" "gzip ratio" "br ratio" RSS
    local runs=0 proxy files conns
    for proxy in $CACHE_PROXIES; do
        for files in $FILES; do
            for conns in $CONNS; do
                runs=$((runs + 1))
            done
        done
    done
    echo "MODE=cache: $runs runs of ${DURATION}s after a warm-up (+${WARMUP}s for zipwire);" \
        "proxies: $CACHE_PROXIES"
    for proxy in $CACHE_PROXIES; do
        if [[ $proxy == zipwire-* ]] && ((zipwire_ok == 0)); then
            continue
        fi
        for files in $FILES; do
            for conns in $CONNS; do
                echo "  $proxy, $files, $conns connections" >&2
                cache_measure "$proxy" "$conns" "$files"
            done
        done
    done
    echo
    echo "hits/s and BW out from wrk (Accept-Encoding: gzip); ratios: original bytes over the"
    echo "bodies' bytes after the warm-up (\"1.00\": sent uncompressed); RSS: peak of the proxy."
    printf '%s\n' "${ROWS[@]}" | column -t -s $'\t' -o ' | '
    if [ -n "${TSV:-}" ]; then
        printf '%s\n' "${ROWS[@]}" >> "$TSV"
    fi
}
