#!/usr/bin/env python3
"""bench/cli.py: zipwire compress/decompress against gzip, pigz, igzip, libdeflate and zstd.

Run through bench/cli.sh, which builds zipwire and checks the tools. Every command reads the
same slice of the large corpus from stdin and writes to a file; rounds alternate the
commands (round 1: A B C ..., round 2: A B C ...) so drift on a shared machine hits all of
them alike, and the table shows each command's median. Peak RSS comes from wait4().

Environment: SIZE (bytes in the slice, default 100000000), ROUNDS (default 3), ZIPWIRE (the
binary), ZIPWIRE_CORPUS, WORK (scratch directory, default a new one under /tmp).
"""

import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchplot import plot


def slice_corpus(corpus, size, path):
    """Writes `size` bytes made of the large corpus files, cycled, to `path`."""
    large = os.path.join(corpus, "large")
    files = sorted(os.path.join(large, f) for f in os.listdir(large))
    if not files:
        sys.exit(f"cli.py: no files in {large}")
    written = 0
    with open(path, "wb") as out:
        while written < size:
            for name in files:
                with open(name, "rb") as f:
                    data = f.read(size - written)
                out.write(data)
                written += len(data)
                if written >= size:
                    break


def run(argv, stdin_path, stdout_path):
    """Runs argv with stdin/stdout redirected; returns (seconds, peak RSS bytes).

    The peak comes from GNU time, not from our own wait4(): a child forked from this Python
    process inherits its resident size into ru_maxrss, which would hide small peaks.
    """
    with open(stdin_path, "rb") as fin, open(stdout_path, "wb") as fout:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, stdin=fin, stdout=fout,
                              stderr=subprocess.PIPE, check=False)
        seconds = time.perf_counter() - start
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not err:
        sys.exit(f"cli.py: {' '.join(argv)} exited {proc.returncode}: {' '.join(err)}")
    return seconds, int(err[-1]) * 1024


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def measure(commands, stdin_path, out_dir, rounds):
    """Alternates the commands for `rounds` rounds; returns {label: (times, rss, out_path)}."""
    results = {label: ([], [], os.path.join(out_dir, f"out{i}")) for i, (label, _) in enumerate(commands)}
    for _ in range(rounds):
        for label, argv in commands:
            times, rss, out = results[label]
            seconds, peak = run(argv, stdin_path, out)
            times.append(seconds)
            rss.append(peak)
    return results


def main():
    # A scratch directory of our own (the slice and every output) goes whatever happens: a
    # failed check exits through sys.exit, Ctrl-C through KeyboardInterrupt, a kill through
    # this handler.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    scratch = not os.environ.get("WORK")
    work = os.environ.get("WORK") or tempfile.mkdtemp(prefix="zipwire-bench-cli-")
    try:
        bench(work)
    finally:
        if scratch:
            shutil.rmtree(work, ignore_errors=True)


def bench(work):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = os.environ.get("ZIPWIRE_CORPUS", os.path.join(root, "..", "shared", "corpus"))
    size = int(os.environ.get("SIZE", "100000000"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    zw = os.environ.get("ZIPWIRE", os.path.join(root, "target", "release", "zipwire"))
    os.makedirs(work, exist_ok=True)
    plain = os.path.join(work, "slice")
    slice_corpus(corpus, size, plain)
    plain_digest = digest(plain)
    mb = size / 1e6

    compressors = [
        ("zipwire -1 -p1", [zw, "compress", "-1", "-p1"]),
        ("zipwire -1 -p2", [zw, "compress", "-1", "-p2"]),
        ("zipwire -3 -p1", [zw, "compress", "-3", "-p1"]),
        ("zipwire -3 -p2", [zw, "compress", "-3", "-p2"]),
        ("zipwire -6 -p1", [zw, "compress", "-6", "-p1"]),
        ("zipwire -6 -p2", [zw, "compress", "-6", "-p2"]),
        ("gzip -1", ["gzip", "-1"]),
        ("gzip -6", ["gzip", "-6"]),
        ("pigz -1 -p2", ["pigz", "-1", "-p2"]),
        ("igzip -1", ["igzip", "-1", "-c"]),
        ("igzip -1 -T2", ["igzip", "-1", "-T2", "-c"]),
        ("libdeflate-gzip -1", ["libdeflate-gzip", "-1", "-c"]),
        ("libdeflate-gzip -6", ["libdeflate-gzip", "-6", "-c"]),
        ("zstd -1 (reference)", ["zstd", "-1", "-q", "-c"]),
    ]
    results = measure(compressors, plain, work, rounds)
    print(f"# compression: {mb:.0f} MB slice of {corpus}/large, {rounds} alternating rounds, "
          f"median wall time; {os.cpu_count()} cores")
    print(f"{'command':22} {'wall s':>8} {'MB/s':>8} {'ratio':>7} {'peak RSS MB':>12}")
    summary = {}
    for label, argv in compressors:
        times, rss, out = results[label]
        wall = statistics.median(times)
        ratio = size / os.path.getsize(out)
        decoder = ["zstd", "-d", "-q", "-c"] if argv[0] == "zstd" else [zw, "decompress", "-c"]
        check = os.path.join(work, "check")
        run(decoder, out, check)
        if digest(check) != plain_digest:
            sys.exit(f"cli.py: {label}: output does not decode to the input")
        if argv[0] != "zstd" and shutil.which("gzip"):
            run(["gzip", "-d", "-c"], out, check)
            if digest(check) != plain_digest:
                sys.exit(f"cli.py: {label}: gzip -d does not decode the output to the input")
        summary[label] = (wall, ratio, max(rss))
        print(f"{label:22} {wall:8.3f} {mb / wall:8.1f} {ratio:7.3f} {max(rss) / 1e6:12.1f}")
    igzip_threads = digest(results["igzip -1 -T2"][2]) != digest(results["igzip -1"][2])
    plot("cli", ["command", "wall s", "MB/s", "ratio", "peak RSS MB"],
         [(label, f"{w:.3f}", f"{mb / w:.1f}", f"{r:.3f}", f"{m / 1e6:.1f}")
          for label, (w, r, m) in summary.items()], zw)

    packed = os.path.join(work, "pigz6.gz")
    run(["pigz", "-6", "-p2"], plain, packed)
    decompressors = [
        ("zipwire -d", [zw, "decompress", "-c"]),
        ("gzip -d", ["gzip", "-d", "-c"]),
        ("pigz -d", ["pigz", "-d", "-c"]),
        ("igzip -d", ["igzip", "-d", "-c"]),
        ("libdeflate-gunzip", ["libdeflate-gunzip", "-c"]),
    ]
    dresults = measure(decompressors, packed, work, rounds)
    print()
    print(f"# decompression of the slice as written by pigz -6 ({os.path.getsize(packed) / 1e6:.1f} MB)")
    print(f"{'command':22} {'wall s':>8} {'MB/s':>8} {'peak RSS MB':>12}")
    dsummary = {}
    for label, _ in decompressors:
        times, rss, out = dresults[label]
        if digest(out) != plain_digest:
            sys.exit(f"cli.py: {label}: wrong output")
        wall = statistics.median(times)
        dsummary[label] = wall
        print(f"{label:22} {wall:8.3f} {mb / wall:8.1f} {max(rss) / 1e6:12.1f}")

    ours, peer = summary["zipwire -1 -p2"], summary["pigz -1 -p2"]
    peak = max(
        [s[2] for label, s in summary.items() if label.startswith("zipwire")]
        + [max(dresults[label][1]) for label, _ in decompressors if label.startswith("zipwire")]
    )
    print()
    print("# issue 3 bar: zipwire -1 -p2 >= 2x pigz -1 -p2 throughput at >= 0.97x its ratio;")
    print("#              decompression >= pigz -d; peak RSS < 64 MB")
    print(f"throughput zipwire -1 -p2 / pigz -1 -p2: {peer[0] / ours[0]:.2f}x")
    print(f"ratio      zipwire -1 -p2 / pigz -1 -p2: {ours[1] / peer[1]:.3f}x")
    print(f"decompression zipwire -d / pigz -d:      {dsummary['pigz -d'] / dsummary['zipwire -d']:.2f}x")
    print(f"peak RSS of any zipwire run:             {peak / 1e6:.1f} MB")
    igzip = summary["igzip -1 -T2"]
    print()
    print("# issue 26 bar: zipwire -1 -p2 >= 1.5x igzip -1 -T2 throughput at >= 1.0x its ratio")
    if not igzip_threads:
        # Debian's igzip (isal 2.30) is built without HAVE_THREADS: -T is parsed and ignored,
        # and the row above is one thread. A threaded igzip compresses blocks of its own and
        # so writes different bytes.
        print("# igzip -1 -T2 wrote what igzip -1 writes: this igzip has no threads and -T2 ran")
        print("# on one core, so the figures below set two threads against one; the bar is not")
        print("# judged (it needs an igzip built with threads)")
    print(f"throughput zipwire -1 -p2 / igzip -1 -T2: {igzip[0] / ours[0]:.3f}x"
          + ("" if igzip_threads else "  (igzip on one thread)"))
    print(f"ratio      zipwire -1 -p2 / igzip -1 -T2: {ours[1] / igzip[1]:.3f}x")


if __name__ == "__main__":
    main()
