# bench/proxy-idle.sh: MODE=idle of bench/proxy.sh, sourced by it (not run alone): what each
# proxy holds for a client connection that waits between requests. IDLE_CONNS clients each
# fetch the page once (Accept-Encoding: gzip) and keep the connection open; the proxy's
# resident memory (all its processes) is read with one such client and with all of them, and
# the growth is divided by the clients added. Uses proxy.sh's variables and functions
# (start_proxy, stop_proxy, row, ...).
#
# A browser keeps idle keep-alive connections open to every site it visited; an edge proxy
# holds thousands of them, so their cost is the proxy's memory floor.

# The client: opens the connections, one request each, and prints the proxy's RSS in KiB with
# the first connection open and with all of them open.
idle_client() { # port, path, connections, proxy pid
    python3 - "$@" << 'PY'
import os, socket, sys, time

port, path, count, root = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def pids(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out

def rss_kib():
    total = 0
    for p in pids(root):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total

def fetch(sock):
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("proxy-idle: the proxy closed a connection before answering")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    fields = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip()
              for l in head.split(b"\r\n")[1:] if b":" in l}
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit(f"proxy-idle: {head.splitlines()[0]!r}")
    if fields.get(b"content-encoding") != b"gzip":
        sys.exit("proxy-idle: the response was not gzip-encoded")
    def more():
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("proxy-idle: the proxy closed a connection mid-body")
        return chunk
    if b"content-length" in fields:
        need = int(fields[b"content-length"])
        while len(body) < need:
            body += more()
    else:
        while not body.endswith(b"0\r\n\r\n"):
            body += more()

socks = []
def add():
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    fetch(s)
    socks.append(s)

add()
time.sleep(0.5)
one = rss_kib()
for _ in range(count - 1):
    add()
time.sleep(0.5)
print(one, rss_kib())
PY
}

idle_main() {
    for proxy in $PROXIES; do
        # A proxy asked for and not measured fails the run: a table without it would pass
        # for a measurement (CI runs this mode to keep the benchmark from rotting).
        if [[ $proxy == zipwire* ]] && ((zipwire_ok == 0)); then
            die "$proxy: no zipwire binary to run"
        fi
        echo "  $proxy, $IDLE_CONNS idle connections" >&2
        start_proxy "$proxy" || die "$proxy did not start"
        local result one all
        result=$(idle_client "$PROXY_PORT" "/$SINGLE" "$IDLE_CONNS" "$PROXY_PID") ||
            die "$proxy: the idle client failed"
        read -r one all <<< "$result"
        stop_proxy
        row "$proxy" "$IDLE_CONNS" "$((one / 1024))MiB" "$((all / 1024))MiB" \
            "$(((all - one) * 1024 / (IDLE_CONNS - 1)))"
    done
    echo
    echo "RSS of the proxy (all its processes) with one idle client connection and with" \
        "$IDLE_CONNS, each after one request for $SINGLE; per connection: the growth / $((IDLE_CONNS - 1))."
    printf '%s\n' "${ROWS[@]}" | column -t -s $'\t' -o ' | '
}
