# bench/proxy-h2.sh: MODE=h2 of bench/proxy.sh, sourced by it (not run alone): each proxy as a
# TLS 1.3 + HTTP/2 edge in front of the same origin, loaded by h2load. Uses proxy.sh's
# variables and functions (start_proxy, stop_proxy, peak_rss_kib, origin_bytes, ...).

H2_FAILURES=()
# Results per row, for the comparison with HAProxy once every row is in.
H2_NAMES=() H2_HITS=() H2_RATIOS=() H2_RSS=() H2_CELLS=() H2_ROUND=()

# A self-signed ECDSA P-256 certificate for 127.0.0.1 and localhost; HAProxy wants the
# certificate and key in one file.
h2_tls_material() {
    local dir=$WORK/tls
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" 2> "$dir/openssl.log" ||
        die "openssl could not make a certificate: $(cat "$dir/openssl.log")"
    cat "$dir/cert.pem" "$dir/key.pem" > "$dir/bundle.pem"
    chmod 600 "$dir/key.pem" "$dir/bundle.pem"
}

# Fetches the page over HTTP/2 asking for coding $2 and prints why it is wrong, if it is:
# not HTTP/2, not encoded with $2, or not decoding to the original.
h2_check() {
    local coding=$2 headers=$WORK/check.headers body=$WORK/check.body decoder
    rm -f "$headers" "$body"
    if ! curl --http2 -k -s --max-time 10 -D "$headers" -o "$body" \
        -H "Accept-Encoding: $coding" "https://127.0.0.1:$PROXY_PORT/$SINGLE"; then
        echo "curl could not fetch $SINGLE"
        return
    fi
    if ! head -1 "$headers" | grep -q '^HTTP/2 200'; then
        echo "answered '$(head -1 "$headers" | tr -d '\r')', not HTTP/2 200"
        return
    fi
    if ! grep -qi "^content-encoding: *$coding" "$headers"; then
        echo "did not $coding-encode $SINGLE (Content-Encoding:" \
            "$(grep -i '^content-encoding:' "$headers" | tr -d '\r' | cut -d: -f2- || echo none))"
        return
    fi
    case $coding in
        gzip) decoder=(gzip -dc) ;;
        zstd) decoder=(zstd -dcq) ;;
    esac
    if ! "${decoder[@]}" < "$body" 2> /dev/null | cmp -s - "$WEB/$SINGLE"; then
        echo "sent a $coding body that does not decode to $SINGLE"
    fi
}

# Marks the run failed (the script exits 1 after the table) and adds a row saying why.
h2_fail() {
    local name=$1
    shift
    echo "FAILED: $name: $*" >&2
    H2_FAILURES+=("$name: $*")
    H2_NAMES+=("$name") H2_HITS+=(-) H2_RATIOS+=(-) H2_RSS+=(-)
    H2_CELLS+=("$(printf 'FAILED\t-\t-\t-\t-\t')")
}

# One h2load run against proxy $1 asking for coding $2.
h2_measure() {
    local proxy=$1 coding=$2 name="$1 $2"
    if ! start_proxy "$proxy"; then
        h2_fail "$name" "did not start: $(grep -m1 -i error "$WORK/proxy.log" || tail -1 "$WORK/proxy.log")"
        return
    fi
    local problem
    problem=$(h2_check "$proxy" "$coding")
    if [ -n "$problem" ]; then
        stop_proxy
        h2_fail "$name" "$problem"
        return
    fi
    sleep 1.2 # the origin flushes its access log each second
    local in_before out rss in_after
    in_before=$(origin_bytes)
    out=$(timeout $((DURATION + 60)) taskset -c "$LOAD_CPU" h2load -t1 -c"$CLIENTS" \
        -m"$STREAMS" -D"$DURATION" -H "accept-encoding: $coding" \
        "https://127.0.0.1:$PROXY_PORT/$SINGLE" 2>&1) || true
    rss=$(peak_rss_kib "$PROXY_PID")
    stop_proxy
    sleep 1.5
    in_after=$(origin_bytes)
    # "finished in 5.00s, ...", "requests: T total, S started, D done, OK succeeded, F failed,
    # E errored, TO timeout", "status codes: a 2xx, b 3xx, c 4xx, d 5xx",
    # "traffic: ... (TOTAL) total, ... (H) headers (...), ... (DATA) data".
    local seconds requests codes traffic
    seconds=$(sed -nE 's/^finished in ([0-9.]+)s,.*/\1/p' <<< "$out")
    requests=$(sed -nE 's/^requests: ([0-9]+) total, ([0-9]+) started, ([0-9]+) done, ([0-9]+) succeeded, ([0-9]+) failed, ([0-9]+) errored, ([0-9]+) timeout$/\4 \5 \6 \7/p' <<< "$out")
    codes=$(sed -nE 's/^status codes: ([0-9]+) 2xx, ([0-9]+) 3xx, ([0-9]+) 4xx, ([0-9]+) 5xx$/\1 \2 \3 \4/p' <<< "$out")
    traffic=$(sed -nE 's/^traffic: .*\(([0-9]+)\) total, .*\(([0-9]+)\) headers .*\(([0-9]+)\) data$/\1 \3/p' <<< "$out")
    if [ -z "$seconds" ] || [ -z "$requests" ] || [ -z "$codes" ] || [ -z "$traffic" ]; then
        h2_fail "$name" "h2load gave no summary: $(tail -5 <<< "$out" | tr '\n' ' ')"
        return
    fi
    local ok failed errored timeouts ok2 s3 s4 s5 total data
    read -r ok failed errored timeouts <<< "$requests"
    read -r ok2 s3 s4 s5 <<< "$codes"
    read -r total data <<< "$traffic"
    if ! grep -q '^TLS Protocol: TLSv1.3$' <<< "$out" ||
        ! grep -q '^Application protocol: h2$' <<< "$out"; then
        h2_fail "$name" "h2load did not get TLS 1.3 and h2:" \
            "$(grep -E '^(TLS Protocol|Application protocol):' <<< "$out" | tr '\n' ' ')"
        return
    fi
    if ((ok == 0 || failed + errored + timeouts > 0 || s3 + s4 + s5 > 0)); then
        h2_fail "$name" "h2load: $ok succeeded, $failed failed, $errored errored," \
            "$timeouts timed out; $ok2 2xx, $s3 3xx, $s4 4xx, $s5 5xx"
        return
    fi
    local size numbers
    size=$(stat -c %s "$WEB/$SINGLE")
    # ratio: the page's bytes over the body bytes on the wire (h2load's DATA payload count).
    numbers=$(awk -v ok="$ok" -v s="$seconds" -v total="$total" -v data="$data" \
        -v bin="$((in_after - in_before))" -v size="$size" -v rss="$rss" 'BEGIN {
            mib = 1024 * 1024
            printf "%.0f %.1fMiB/s %.1fMiB/s %.2f %.1fMiB\n",
                ok / s, bin / s / mib, total / s / mib, (data > 0 ? ok * size / data : 0),
                rss / 1024
        }')
    local cells
    read -r -a cells <<< "$numbers"
    H2_NAMES+=("$name") H2_HITS+=("${cells[0]}") H2_RATIOS+=("${cells[3]}")
    H2_RSS+=("${cells[4]%MiB}")
    H2_CELLS+=("$(printf '%s\t' "${cells[@]}")")
}

# Every run, then the table with each row against HAProxy's, then the issue's bar.
h2_main() {
    h2_tls_material
    local proxy coding round k order
    read -r -a order <<< "$PROXIES"
    for ((round = 0; round < ROUNDS; round++)); do
        # Each round starts one proxy later, so that none is always measured first or last.
        k=$((round % ${#order[@]}))
        for proxy in "${order[@]:k}" "${order[@]:0:k}"; do
            if [ "$proxy" = zipwire ] && ((zipwire_ok == 0)); then
                continue
            fi
            for coding in $(h2_codings "$proxy"); do
                echo "  round $((round + 1)): $proxy asking $coding, h2load -c$CLIENTS -m$STREAMS" >&2
                h2_measure "$proxy" "$coding"
                H2_ROUND+=("$round")
            done
        done
    done

    # Each row against HAProxy's gzip row of its own round.
    local bases=() i
    for i in "${!H2_NAMES[@]}"; do
        [ "${H2_NAMES[i]}" = "haproxy gzip" ] && [ "${H2_HITS[i]}" != - ] &&
            bases[H2_ROUND[i]]=$i
    done
    local base=-1
    local rows=() vs need
    rows+=("$(printf '%s\t' proxy coding hits/s "BW in" "BW out" ratio RSS \
        "hits/s vs HAProxy" "ratio vs HAProxy")RSS vs HAProxy")
    for i in "${!H2_NAMES[@]}"; do
        vs="-	-	-"
        base=${bases[H2_ROUND[i]]:--1}
        if ((base >= 0)) && [ "${H2_HITS[i]}" != - ]; then
            vs=$(awk -v h="${H2_HITS[i]}" -v hb="${H2_HITS[base]}" -v r="${H2_RATIOS[i]}" \
                -v rb="${H2_RATIOS[base]}" -v m="${H2_RSS[i]}" -v mb="${H2_RSS[base]}" \
                'BEGIN { printf "%.2fx\t%.2fx\t%.2fx", h / hb, r / rb, m / mb }')
        fi
        rows+=("$(printf '%s\t%s\t%s%s' "${H2_NAMES[i]% *}" "${H2_NAMES[i]#* }" \
            "${H2_CELLS[i]}" "$vs")")
    done
    echo
    echo "MODE=h2: TLS 1.3 + HTTP/2, h2load -c$CLIENTS -m$STREAMS -D$DURATION, $SINGLE, each"
    echo "proxy on one core. BW in: bytes the origin sent (headers and bodies); BW out: bytes h2load"
    echo "read (HTTP/2 frames, TLS records not counted); ratio: the page's size over the body bytes"
    echo "received (h2load's data count); RSS: peak resident memory of the proxy."
    printf '%s\n' "${rows[@]}" | column -t -s $'\t' -o ' | '
    # Issue 22's bar, from the medians of each round's ratios to HAProxy's gzip row.
    local name
    for name in "zipwire gzip" "zipwire zstd"; do
        case $name in
            "zipwire gzip") need=1.3 ;;
            *) need=1.45 ;;
        esac
        for i in "${!H2_NAMES[@]}"; do
            base=${bases[H2_ROUND[i]]:--1}
            [ "${H2_NAMES[i]}" = "$name" ] && [ "${H2_HITS[i]}" != - ] && ((base >= 0)) || continue
            echo "${H2_HITS[i]} ${H2_HITS[base]} ${H2_RATIOS[i]} ${H2_RATIOS[base]} ${H2_RSS[i]} ${H2_RSS[base]}"
        done | awk -v name="$name" -v need="$need" -v rounds="$ROUNDS" '
            function median(a, n,    i, j, t) {
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                    if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            { n++; h[n] = $1 / $2; r[n] = $3 / $4; m[n] = $5 / $6 }
            END {
                if (n == 0) exit
                hm = median(h, n); rm = median(r, n); mm = median(m, n)
                met = hm >= 1 && rm >= need && mm <= 1.5
                printf "bar (issue 22): %s: hits/s %.2fx (>= 1.0), ratio %.2fx (>= %s), " \
                    "RSS %.2fx (<= 1.5) vs HAProxy, median of %d of %d rounds: %s\n", name, hm,
                    rm, need, mm, n, rounds, (met ? "met" : "NOT met")
            }'
    done
    if [[ " $PROXIES " == *" zipwire "* ]] && ((zipwire_ok == 0)); then
        echo "zipwire: skipped, '$ZIPWIRE proxy --help' fails (cargo build --release -p zipwire)"
    fi
    if [ -n "${TSV:-}" ]; then
        printf '%s\n' "${rows[@]}" >> "$TSV"
    fi
    plot_rows rows
    echo "($((SECONDS - started))s)"
    if ((${#H2_FAILURES[@]})); then
        echo >&2
        echo "proxy.sh MODE=h2: ${#H2_FAILURES[@]} run(s) failed:" >&2
        printf '  %s\n' "${H2_FAILURES[@]}" >&2
        exit 1
    fi
}
