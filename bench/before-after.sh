#!/usr/bin/env bash
# bench/before-after.sh: two zipwire binaries side by side on bench/proxy.sh's loads, to show
# that a change which should not move performance (a refactor) did not.
#
# Each round runs every mode once per binary, the order of the two swapped every round so
# that drift on the machine hits both alike; each run is bench/proxy.sh with PROXIES=zipwire
# (MODE=cache: CACHE_PROXIES=zipwire-fresh) and ROUNDS=1. The table gives, per mode and row,
# the median over rounds of AFTER's hits/s and peak RSS against BEFORE's of the same round.
#
# Environment (defaults in brackets):
#   BEFORE, AFTER             the two zipwire binaries (required)
#   MODES ["http1 h2 cache"]  bench/proxy.sh modes
#   ROUNDS [3]  DURATION [10]  CONNS [500]  FILES [single]
# Everything else (ports, CPUs, corpus) is bench/proxy.sh's.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${BEFORE:?set BEFORE to the baseline zipwire binary}"
: "${AFTER:?set AFTER to the zipwire binary under test}"
MODES=${MODES:-"http1 h2 cache"}
ROUNDS=${ROUNDS:-3}
export DURATION=${DURATION:-10} CONNS=${CONNS:-500} FILES=${FILES:-single}
for bin in "$BEFORE" "$AFTER"; do
    "$bin" proxy --help > /dev/null 2>&1 || { echo "not a zipwire binary: $bin" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/zipwire-before-after.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# One run of MODE with BIN; its TSV rows, prefixed with the round, mode and side, go to rows.
run() {
    local round=$1 mode=$2 side=$3 bin=$4 tsv="$WORK/run.tsv"
    : > "$tsv"
    echo "round $((round + 1)), $mode, $side" >&2
    MODE=$mode PROXIES=zipwire CACHE_PROXIES=zipwire-fresh ROUNDS=1 PLOT= TSV="$tsv" \
        ZIPWIRE=$bin "$ROOT/bench/proxy.sh" > "$WORK/$mode.$side.$round.out" 2>&1 \
        || { cat "$WORK/$mode.$side.$round.out" >&2; echo "bench/proxy.sh MODE=$mode failed" >&2; exit 1; }
    [ -s "$tsv" ] || { cat "$WORK/$mode.$side.$round.out" >&2; echo "no rows from MODE=$mode" >&2; exit 1; }
    sed "s/^/$round\t$mode\t$side\t/" "$tsv" >> "$WORK/rows"
}

for ((round = 0; round < ROUNDS; round++)); do
    for mode in $MODES; do
        if ((round % 2 == 0)); then
            run "$round" "$mode" before "$BEFORE"
            run "$round" "$mode" after "$AFTER"
        else
            run "$round" "$mode" after "$AFTER"
            run "$round" "$mode" before "$BEFORE"
        fi
    done
done

echo "# before: $BEFORE"
echo "# after:  $AFTER"
echo "# $ROUNDS rounds, ${DURATION}s per run, alternating; medians over rounds of hits/s and of"
echo "# the proxy's peak RSS (MiB), and of each round's after/before ratio"
echo
echo "| mode | row | hits/s before | hits/s after | after/before | RSS before | RSS after | after/before |"
echo "|---|---|--:|--:|--:|--:|--:|--:|"
# Rows are matched by mode and their own label fields (the 1st to 3rd of proxy.sh's row).
awk -F'\t' '
    # MODE=h2 rows: proxy, coding, hits/s, BW in, BW out, ratio, RSS, then three columns
    # against HAProxy; the other modes: proxy, conns, file, hits/s, ..., RSS last.
    $2 == "h2" { key = $2 "\t" $4 " " $5; h = $6; m = $10 }
    $2 != "h2" { key = $2 "\t" $4 " " $5 " " $6; h = $7; m = $NF }
    # The label row of each run (its hits/s cell is a heading) is no result.
    h !~ /^[0-9.]+$/ { next }
    { seen[key] = 1; hits[key, $1, $3] = h; rss[key, $1, $3] = m
      if ($1 + 1 > rounds) rounds = $1 + 1 }
    function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        for (key in seen) {
            n = 0; split("", hr); split("", rr); split("", hb); split("", ha); split("", rb); split("", ra)
            for (r = 0; r < rounds; r++) {
                b = hits[key, r, "before"]; a = hits[key, r, "after"]
                if (b + 0 > 0 && a + 0 > 0) {
                    n++; hr[n] = a / b; hb[n] = b; ha[n] = a
                    rb[n] = rss[key, r, "before"]; ra[n] = rss[key, r, "after"]
                    rr[n] = (rb[n] + 0 > 0) ? ra[n] / rb[n] : 0
                }
            }
            split(key, k, "\t")
            if (n == 0) { printf "| %s | %s | - | - | - | - | - | - |\n", k[1], k[2]; continue }
            printf "| %s | %s | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f |\n", k[1], k[2],
                median(hb, n), median(ha, n), median(hr, n), median(rb, n), median(ra, n), median(rr, n)
        }
    }' "$WORK/rows" | sort
