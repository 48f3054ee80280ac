#!/usr/bin/env bash
# bench/cache-tests.sh: zipwire's cache against the HTTP cache test suite (http-cache-tests on
# npm, the suite behind https://cache-tests.fyi), beside the results that package publishes
# for the shared caches it was run against (nginx, Squid, Apache Traffic Server, Apache httpd,
# Varnish, nuster).
#
# The suite's origin server runs on loopback (ORIGIN_PORT), zipwire in front of it
# (PROXY_PORT) with `[cache] mode = "fresh"` and the other settings as given in EXTRA (TOML
# lines for the top-level table); the suite's command-line client runs every test through the
# proxy. The package is installed from npm into a work directory, never into the repository.
# Prints the table of required tests passed and failed per cache, and the required tests
# zipwire fails with the suite's reason; RESULTS keeps zipwire's raw results.
#
# Environment (defaults in brackets):
#   ZIPWIRE [target/release/zipwire]   ORIGIN_PORT [18090]   PROXY_PORT [18091]
#   SUITE_VERSION [0.4.5]   RESULTS [cache-tests.json]
#
# Needs node and npm (apt-get install nodejs npm) and curl.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZIPWIRE=${ZIPWIRE:-$ROOT/target/release/zipwire}
ORIGIN_PORT=${ORIGIN_PORT:-18090}
PROXY_PORT=${PROXY_PORT:-18091}
SUITE_VERSION=${SUITE_VERSION:-0.4.5}
RESULTS=${RESULTS:-cache-tests.json}

die() {
    echo "cache-tests.sh: $*" >&2
    exit 1
}

for tool in node npm curl; do
    command -v "$tool" > /dev/null || die "$tool is missing (apt-get install nodejs npm curl)"
done
[ -x "$ZIPWIRE" ] || die "no zipwire at $ZIPWIRE (cargo build --release -p zipwire)"

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2> /dev/null || true
    done
    wait 2> /dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# The package, and only the two libraries its server and client use (its own dependency on
# npm 6 is for publishing).
(
    cd "$WORK"
    npm pack --silent "http-cache-tests@$SUITE_VERSION" > /dev/null
    tar xzf "http-cache-tests-$SUITE_VERSION.tgz"
    cd package
    npm install --silent --no-save --no-audit --no-fund liquidjs@9 node-fetch@2 > /dev/null
)
SUITE=$WORK/package

# Something else on a port would answer the checks and the suite in our servers' stead.
port_free() {
    ! (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null
}
port_free "$ORIGIN_PORT" || die "port $ORIGIN_PORT is in use (set ORIGIN_PORT)"
port_free "$PROXY_PORT" || die "port $PROXY_PORT is in use (set PROXY_PORT)"

wait_http() {
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
        sleep 0.1
    done
    return 1
}

(
    cd "$SUITE"
    npm_config_protocol=http npm_config_port=$ORIGIN_PORT npm_config_pidfile=$WORK/server.pid \
        exec node server/server.mjs
) > "$WORK/origin.log" 2>&1 &
PIDS+=($!)
wait_http "$ORIGIN_PORT" || die "the suite's server did not start: $(cat "$WORK/origin.log")"

cat > "$WORK/zipwire.toml" << EOF
listen = "127.0.0.1:$PROXY_PORT"
upstreams = ["http://127.0.0.1:$ORIGIN_PORT"]
threads = 1
access_log = false
${EXTRA:-}
[cache]
mode = "fresh"
EOF
"$ZIPWIRE" proxy --config "$WORK/zipwire.toml" > "$WORK/proxy.log" 2>&1 &
PIDS+=($!)
wait_http "$PROXY_PORT" || die "zipwire did not start: $(cat "$WORK/proxy.log")"
kill -0 "${PIDS[-1]}" 2> /dev/null || die "zipwire exited: $(cat "$WORK/proxy.log")"

(
    cd "$SUITE"
    npm_config_base="http://127.0.0.1:$PROXY_PORT" npm_package_config_id='' \
        node --no-warnings cli.mjs
) > "$RESULTS"
node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$RESULTS" \
    || die "the suite's client wrote no results: $(head -c 2000 "$RESULTS")"
echo "cache-tests.sh: http-cache-tests $SUITE_VERSION through zipwire $("$ZIPWIRE" --version)" \
    "([cache] mode = \"fresh\"); the other rows are the package's published results"
node "$ROOT/bench/cache-tests-summary.mjs" "$SUITE" "$RESULTS"
