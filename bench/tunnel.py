#!/usr/bin/env python3
"""The tunnel benchmark (run it through bench/tunnel.sh, as root).

Two network namespaces joined by a veth pair; the sending side's egress is shaped with
tc tbf. A sink in the receiving namespace reads each transfer to its end and answers with the
byte count; the sender times from connect to that answer. Every method carries the same file
to the same sink, in alternating order, per link and data set:

  plain TCP | ssh -L | ssh -C -L | zipwire tunnel auto | zipwire --level raw | 1 | 6

Also used as its own helper: `tunnel.py sink PORT` and `tunnel.py send HOST PORT FILE`.
"""

import hashlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchplot import plot

# Named per run, so that two runs (or a run beside a test) never share one.
NS_A, NS_B = f"zwbench-a-{os.getpid()}", f"zwbench-b-{os.getpid()}"
IP_A, IP_B = "10.77.0.1", "10.77.0.2"
SINK_PORT = 9000
METHODS = [
    ("plain", None),
    ("ssh", 5001),
    ("ssh -C", 5002),
    ("zw auto", 6001),
    ("zw raw", 6002),
    ("zw 1", 6003),
    ("zw 6", 6004),
]
ZW_LEVELS = {6001: "auto", 6002: "raw", 6003: "1", 6004: "6"}


def sink(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)

    def serve(conn):
        total = 0
        digest = hashlib.sha256()
        with conn:
            while True:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                total += len(chunk)
                digest.update(chunk)
            conn.sendall(f"{total} {digest.hexdigest()}".encode())

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def send(host, port, path):
    with open(path, "rb") as f:
        data = f.read()
    start = time.perf_counter()
    conn = socket.create_connection((host, int(port)))
    conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
    answer = b""
    while True:
        chunk = conn.recv(64)
        if not chunk:
            break
        answer += chunk
    elapsed = time.perf_counter() - start
    # Every byte arrived, and the bytes are the file's: a tunnel that delivered the right
    # count of wrong bytes must not be measured.
    if answer != f"{len(data)} {hashlib.sha256(data).hexdigest()}".encode():
        print(f"FAILED {answer!r}")
        sys.exit(1)
    print(f"{elapsed:.6f}")


def run(*args, ns=None, check=True, **kw):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, check=check, **kw)


def spawn(*args, ns, log):
    cmd = ["ip", "netns", "exec", ns] + list(args)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"), start_new_session=True)


def wait_port(ns, host, port, timeout=20):
    code = f"import socket;socket.create_connection(('{host}',{port}),timeout=1).close()"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if run("python3", "-c", code, ns=ns, check=False, capture_output=True).returncode == 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"nothing listens on {host}:{port} in {ns}")


def setup_net():
    teardown_net()
    run("ip", "netns", "add", NS_A)
    run("ip", "netns", "add", NS_B)
    run("ip", "link", "add", "zwA", "netns", NS_A, "type", "veth", "peer", "name", "zwB", "netns", NS_B)
    for ns, dev, ip in ((NS_A, "zwA", IP_A), (NS_B, "zwB", IP_B)):
        run("ip", "addr", "add", f"{ip}/24", "dev", dev, ns=ns)
        run("ip", "link", "set", dev, "up", ns=ns)
        run("ip", "link", "set", "lo", "up", ns=ns)


def teardown_net():
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL, check=False)


def set_link(mbit):
    for ns, dev in ((NS_A, "zwA"), (NS_B, "zwB")):
        run("tc", "qdisc", "del", "dev", dev, "root", ns=ns, check=False, stderr=subprocess.DEVNULL)
        if mbit:
            burst = max(64 * 1024, mbit * 1_000_000 // 8 // 250)
            run("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
                "burst", str(burst), "latency", "20ms", ns=ns)


def corpus_slice(paths, size):
    out = bytearray()
    while len(out) < size:
        for p in paths:
            with open(p, "rb") as f:
                out += f.read(size - len(out))
            if len(out) >= size:
                break
    return bytes(out)


def make_data(corpus, size, tmp):
    large = os.path.join(corpus, "large")
    incompressible = os.path.join(corpus, "incompressible")
    sets = {
        "mixed": corpus_slice([os.path.join(large, "debian-libruby3.1-3.1.7-contents.tar")], size),
        "text": corpus_slice([os.path.join(large, "github-rest-api-openapi.json")], size),
        "compressed": corpus_slice(sorted(
            os.path.join(incompressible, n) for n in os.listdir(incompressible)), size),
    }
    # What forwarded HTTPS looks like: TLS 1.2/1.3 application-data records of random bytes.
    tls = bytearray()
    while len(tls) < size:
        body = os.urandom(16384 + 16)
        tls += bytes([0x17, 3, 3]) + len(body).to_bytes(2, "big") + body
    sets["tls"] = bytes(tls[:size])
    files = {}
    for name, data in sets.items():
        path = os.path.join(tmp, f"{name}.bin")
        with open(path, "wb") as f:
            f.write(data)
        files[name] = path
    return files


def start_services(tmp, zipwire, procs):
    me = os.path.abspath(__file__)
    procs.append(spawn("python3", me, "sink", str(SINK_PORT), ns=NS_B, log=f"{tmp}/sink.log"))
    # sshd in B, ssh port forwards in A.
    os.makedirs("/run/sshd", exist_ok=True)
    for key in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{tmp}/{key}"], check=True)
    shutil.copy(f"{tmp}/user.pub", f"{tmp}/authorized_keys")
    with open(f"{tmp}/sshd_config", "w") as f:
        f.write(f"ListenAddress {IP_B}\nPort 22\nHostKey {tmp}/host\nPidFile {tmp}/sshd.pid\n"
                f"AuthorizedKeysFile {tmp}/authorized_keys\nPermitRootLogin yes\nStrictModes no\n"
                "UsePAM no\nPasswordAuthentication no\nAllowTcpForwarding yes\n")
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    procs.append(spawn(sshd, "-D", "-e", "-f", f"{tmp}/sshd_config", ns=NS_B, log=f"{tmp}/sshd.log"))
    wait_port(NS_A, IP_B, 22)
    for port, extra in ((5001, []), (5002, ["-C"])):
        procs.append(spawn("ssh", "-N", *extra, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "-i", f"{tmp}/user",
                           "-L", f"127.0.0.1:{port}:127.0.0.1:{SINK_PORT}", f"root@{IP_B}",
                           ns=NS_A, log=f"{tmp}/ssh{port}.log"))
    # zipwire tunnel server in B, one client per level in A.
    pin = subprocess.run([zipwire, "tunnel", "keygen", "--out", f"{tmp}/zw"], check=True,
                         capture_output=True, text=True).stdout.strip()
    procs.append(spawn(zipwire, "tunnel", "server", "--listen", f"{IP_B}:7443", "--forward",
                       f"127.0.0.1:{SINK_PORT}", "--cert", f"{tmp}/zw/cert.pem", "--key",
                       f"{tmp}/zw/key.pem", "--token-file", f"{tmp}/zw/token", ns=NS_B,
                       log=f"{tmp}/zw-server.log"))
    wait_port(NS_A, IP_B, 7443)
    for port, level in ZW_LEVELS.items():
        procs.append(spawn(zipwire, "tunnel", "client", "--listen", f"127.0.0.1:{port}", "--server",
                           f"{IP_B}:7443", "--pin", pin, "--token-file", f"{tmp}/zw/token",
                           "--level", level, "-v", ns=NS_A, log=f"{tmp}/zw-{level}.log"))
    for _, port in METHODS:
        wait_port(NS_A, "127.0.0.1" if port else IP_B, port or SINK_PORT)


def transfer(port, path):
    me = os.path.abspath(__file__)
    host, port = ("127.0.0.1", port) if port else (IP_B, SINK_PORT)
    out = run("python3", me, "send", host, str(port), path, ns=NS_A, capture_output=True, text=True,
              check=False)
    if out.returncode != 0:
        raise SystemExit(f"transfer to {host}:{port} failed: {out.stdout} {out.stderr}")
    return float(out.stdout.strip())


def main():
    size = int(os.environ.get("SIZE", "30000000"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    links = [int(x) for x in os.environ.get("LINKS", "10,100,1000,0").split(",")]
    corpus = os.environ["ZIPWIRE_CORPUS"]
    zipwire = os.environ["ZIPWIRE"]
    tmp = tempfile.mkdtemp(prefix="zw-tunnel-bench-")
    procs = []
    # The cleanup below runs on an exception only: SIGTERM (a timeout, a cancelled CI job)
    # and SIGHUP become one, or the namespaces, sshd and the tunnels outlive the run.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    try:
        setup_net()
        start_services(tmp, zipwire, procs)
        files = make_data(corpus, size, tmp)
        results = {}
        for mbit in links:
            set_link(mbit)
            scale = 10 if mbit == 10 else 3 if mbit == 100 else 1
            # The adaptive client remembers the pace of its path for 30 s: one uncounted
            # transfer lets it learn this link's before the first measured one, as the fixed
            # levels need no such start.
            warm = os.path.join(tmp, "warm.bin")
            with open(files["text"], "rb") as src, open(warm, "wb") as dst:
                dst.write(src.read(size // scale // 10))
            transfer(dict((v, k) for k, v in ZW_LEVELS.items())["auto"], warm)
            for name, path in files.items():
                part = f"{path}.{scale}"
                with open(path, "rb") as src, open(part, "wb") as dst:
                    dst.write(src.read(size // scale))
                nbytes = size // scale
                for r in range(rounds):
                    order = METHODS[r % len(METHODS):] + METHODS[:r % len(METHODS)]
                    for label, port in order:
                        secs = transfer(port, part)
                        results.setdefault((mbit, name, label), []).append(nbytes / secs / 1e6)
                print(f"# {mbit or 'unlimited'} Mbit/s, {name}: done", file=sys.stderr, flush=True)
        report(results, links, list(files), size, rounds)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        teardown_net()
        if os.environ.get("KEEP"):
            print(f"# logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def report(results, links, sets, size, rounds):
    labels = [m for m, _ in METHODS]
    print(f"zipwire bench tunnel: payload MB/s (median of {rounds}), {size} bytes per transfer "
          "at 1 Gbit/s and unlimited, a third at 100, a tenth at 10")
    print(f"{'link':>10} {'data':<11}" + "".join(f"{l:>9}" for l in labels)
          + f"{'auto/fixed':>11}{'auto/ssh-C':>11}")
    failed = 0
    rows = []
    for mbit in links:
        for name in sets:
            med = {l: statistics.median(results[(mbit, name, l)]) for l in labels}
            rows.append([f"{mbit} Mbit" if mbit else "unlimited", name]
                        + [f"{med[l]:.1f}" for l in labels])
            best_fixed = max(med["zw raw"], med["zw 1"], med["zw 6"])
            vs_fixed = med["zw auto"] / best_fixed
            vs_ssh = med["zw auto"] / med["ssh -C"]
            need_ssh = 2.0 if mbit in (0, 1000) else 1.2 if mbit == 10 else None
            ok = vs_fixed >= 0.9 and (need_ssh is None or vs_ssh >= need_ssh)
            failed += not ok
            link = f"{mbit} Mbit" if mbit else "unlimited"
            print(f"{link:>10} {name:<11}" + "".join(f"{med[l]:9.1f}" for l in labels)
                  + f"{vs_fixed:11.2f}{vs_ssh:11.2f}" + ("" if ok else "  below bar"))
    plot("tunnel", ["link", "data"] + labels, rows, os.environ["ZIPWIRE"])
    print(f"bar: auto >= 0.9x best fixed everywhere, >= 2x ssh -C at 1 Gbit/s and unlimited, "
          f">= 1.2x ssh -C at 10 Mbit/s: {'met' if not failed else f'{failed} cells below'}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "sink":
        sink(int(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "send":
        send(*sys.argv[2:5])
    else:
        main()
