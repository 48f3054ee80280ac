#!/usr/bin/env python3
"""bench/libz-levels.py: what each zlib level costs with the drop-in zlib (crates/libz).

For zlib levels 1-9, Python's zlib.compressobj (gzip framing, windowBits 31) compresses the
first 8 MB of every file of canterbury/, web/ and large/ in one call, once with the library
preloaded and once with the system zlib, alternating, ROUNDS times; prints size / input for
both, the ratio of their ratios and MB/s per second of the process's CPU time (the best
round). Every stream is checked to decompress to its input; the library's, in the first round,
by this process, on the system zlib (the library's own inflate is zlib-rs's, so a check in
its process would not be the system's).

    python3 bench/libz-levels.py            # ZIPWIRE_CORPUS, LIB, ROUNDS [3] from the environment
"""

import json
import os
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.environ.get("ZIPWIRE_CORPUS", os.path.join(ROOT, "..", "shared", "corpus"))
LIB = os.environ.get("LIB", "")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SLICE = 8 << 20

# Runs in a child, so that the library is preloaded (or not) from the start.
CHILD = r"""
import json, os, sys, time, zlib
paths, slice_ = json.loads(sys.argv[1]), int(sys.argv[2])
keep = sys.argv[3] if len(sys.argv) > 3 else None
# ld.so skips a library it cannot preload with a warning only: the "library" columns would
# be the system zlib's again.
lib = os.environ.get("LD_PRELOAD")
if lib and os.path.realpath(lib) not in open("/proc/self/maps").read():
    sys.exit(f"{lib} was not loaded")
data = [open(p, "rb").read(slice_) for p in paths]
out = {}
for level in range(1, 10):
    size, cpu = 0, 0.0
    for i, d in enumerate(data):
        t = time.process_time()
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        z = c.compress(d) + c.flush()
        cpu += time.process_time() - t
        assert zlib.decompress(z, 31) == d
        if keep:
            with open(os.path.join(keep, f"{level}-{i}.gz"), "wb") as f:
                f.write(z)
        size += len(z)
    out[level] = (size, cpu)
print(json.dumps(out))
"""


def corpus_files():
    files = []
    for sub in ("canterbury", "web", "large"):
        d = os.path.join(CORPUS, sub)
        if not os.path.isdir(d):
            sys.exit(f"libz-levels.py: missing {d} (set ZIPWIRE_CORPUS)")
        files += sorted(os.path.join(d, n) for n in os.listdir(d))
    return [f for f in files if os.path.isfile(f)]


def run(paths, preload, check=False):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("ZIPWIRE_ZLIB_ADAPT", None)
    if preload:
        env["LD_PRELOAD"] = LIB
    with tempfile.TemporaryDirectory() as keep:
        args = [sys.executable, "-c", CHILD, json.dumps(paths), str(SLICE)]
        res = subprocess.run(args + ([keep] if check else []), env=env, capture_output=True,
                             text=True)
        if res.returncode != 0:
            side = "library" if preload else "system zlib"
            sys.exit(f"libz-levels.py: the {side} run failed: {res.stderr.strip()[-2000:]}")
        if check:
            verify(paths, keep)
    return {int(k): v for k, v in json.loads(res.stdout).items()}


def verify(paths, keep):
    """Decompresses every stream the child kept with this process's zlib, the system's."""
    data = [open(p, "rb").read(SLICE) for p in paths]
    streams = sorted(os.listdir(keep), key=lambda n: tuple(int(x) for x in n[:-3].split("-")))
    for level in range(1, 10):
        mine = [n for n in streams if n.startswith(f"{level}-")]
        if len(mine) != len(data):
            sys.exit(f"libz-levels.py: level {level}: {len(mine)} streams for {len(data)} files")
        for name, d in zip(mine, data):
            with open(os.path.join(keep, name), "rb") as f:
                try:
                    same = zlib.decompress(f.read(), 31) == d
                except zlib.error:
                    same = False
            if not same:
                sys.exit(f"libz-levels.py: level {level}: a library stream does not "
                         "decompress to its input with the system zlib")


def main():
    global LIB
    if not LIB:
        # The library as docs/libz.md installs it: cargo's build, linked with zlib's symbol
        # versions.
        LIB = os.path.join(ROOT, "target", "release", "libzipwire_z.versioned.so")
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "zipwire-libz"], cwd=ROOT,
                       check=True)
        subprocess.run(["sh", os.path.join(ROOT, "crates", "libz", "link.sh")], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
    paths = corpus_files()
    total = sum(min(os.path.getsize(p), SLICE) for p in paths)
    best = {False: {}, True: {}}
    for round_ in range(ROUNDS):
        for preload in (False, True):
            for level, (size, cpu) in run(paths, preload, preload and round_ == 0).items():
                prev = best[preload].get(level)
                best[preload][level] = (size, min(cpu, prev[1]) if prev else cpu)
    print(f"{len(paths)} files, {total / 1e6:.1f} MB (the first 8 MB of each), gzip in one call,"
          f" best of {ROUNDS} rounds")
    print(f"{'level':>5} {'zlib size/in':>13} {'library size/in':>16} {'ratio lib/zlib':>15}"
          f" {'library MB/s':>13} {'zlib MB/s':>10}")
    for level in range(1, 10):
        zs, zc = best[False][level]
        ls, lc = best[True][level]
        print(f"{level:>5} {zs / total:>13.4f} {ls / total:>16.4f} {zs / ls:>15.2f}"
              f" {total / 1e6 / lc:>13.0f} {total / 1e6 / zc:>10.0f}")


if __name__ == "__main__":
    main()
