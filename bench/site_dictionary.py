"""The visitors of bench/site_dictionary.sh: python3 site_dictionary.py PYDOC PROXY_PORT
ADMIN_PORT. Prints the table; exits non-zero when a body does not decode to its file
(br with the `brotli` command, dcz with `zstd -d -D`; dcb is checked by the test suite, no
command-line decoder takes a dictionary)."""

import base64
import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT, PORT, ADMIN = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
HOST = f"localhost:{PORT}"


def pages():
    found = []
    for top, _, files in os.walk(ROOT):
        for name in files:
            path = os.path.relpath(os.path.join(top, name), ROOT)
            if name.endswith(".html") and "genindex" not in name and not path.startswith("_"):
                found.append("/" + path)
    return sorted(found)


def next_links(start, count):
    sequence, path = [], start
    while path and len(sequence) < count:
        sequence.append(path)
        with open(ROOT + path, encoding="utf-8") as page:
            found = re.search(r'<link rel="next" title="[^"]*" href="([^"]+)"', page.read())
        path = os.path.normpath(os.path.join(os.path.dirname(path), found.group(1))) if found else None
    return sequence


def get(path, fields):
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    connection.request("GET", path, headers={"Host": HOST, **fields})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    if response.status != 200:
        sys.exit(f"{path}: status {response.status}")
    return response, body


def run(command, data):
    return subprocess.run(command, input=data, capture_output=True, check=True).stdout


def stats():
    connection = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=10)
    connection.request("GET", "/stats")
    return json.loads(connection.getresponse().read())["dictionaries"]


def settle():
    """Waits until the cache's background worker has made every variant and delta at its
    best level: its recompression count unchanged for 8 s (at most 15 minutes)."""
    start, last, since = time.time(), None, time.time()
    while time.time() - start < 900:
        connection = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=10)
        connection.request("GET", "/stats")
        now = json.loads(connection.getresponse().read())["cache"]["recompressions"]
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= 8:
            return
        time.sleep(0.5)
    sys.exit("the cache's worker did not settle in 15 minutes")


# What the visitors list besides Chromium's other codings: one dictionary coding each, then
# both, as Chromium does (the proxy picks dcz on the request path, dcb from the cache).
CHROMIUM = "dcb, dcz"
CODINGS = ("dcz", "dcb", CHROMIUM)


def visit_plain(sequence):
    """A visitor whose browser has no dictionary support: Chromium's other codings."""
    sent = 0
    for path in sequence:
        response, body = get(path, {"Accept-Encoding": "gzip, deflate, br, zstd"})
        sent += len(body)
    return sent


def visit(sequence, offer):
    """One visitor with an empty cache: bytes of the first page (br, no dictionary yet), of
    the dictionary it announces, and of the other pages as deltas in one of the dictionary
    codings `offer` lists ("dcb, dcz" is Chromium's list)."""
    offered = [coding.strip() for coding in offer.split(",")]
    first, body = get(sequence[0], {"Accept-Encoding": "br"})
    link = first.getheader("Link") or ""
    target = re.match(r"<([^>]+)>;\s*rel=\"compression-dictionary\"", link)
    if not target:
        sys.exit(f"{sequence[0]} announced no dictionary: Link {link!r}")
    served, packed = get(target.group(1), {"Accept-Encoding": "br"})
    dictionary = run(["brotli", "-d", "-c"], packed) if served.getheader("Content-Encoding") == "br" else packed
    hash_field = ":" + base64.b64encode(hashlib.sha256(dictionary).digest()).decode() + ":"
    sent = {"first": len(body), "dictionary": len(packed), "pages": 0}
    with tempfile.NamedTemporaryFile() as file:
        file.write(dictionary)
        file.flush()
        for path in sequence[1:]:
            response, body = get(path, {
                "Accept-Encoding": f"gzip, deflate, br, zstd, {offer}",
                "Available-Dictionary": hash_field,
                "Sec-Fetch-Site": "same-origin",
                "Sec-Fetch-Mode": "navigate",
                "Sec-Fetch-Dest": "document",
            })
            coding = response.getheader("Content-Encoding")
            if coding not in offered:
                sys.exit(f"{path} came as {coding}, not {offer}")
            if coding == "dcz":
                with open(ROOT + path, "rb") as original:
                    if run(["zstd", "-q", "-d", "-c", "-D", file.name], body[40:]) != original.read():
                        sys.exit(f"the dcz body of {path} does not decode to it")
            sent["pages"] += len(body)
    return sent, len(dictionary)


def main():
    everything = pages()
    spread = everything[4::10][:50]
    ordered = next_links("/tutorial/index.html", 50)
    held = set(spread) | set(ordered)
    train = [path for path in everything if path not in held][::10]
    for path in train:
        get(path, {"Accept-Encoding": "br"})
    start = time.time()
    while stats()["site_built"] == 0:
        if time.time() - start > 120:
            sys.exit("no site dictionary built in 120 s")
        time.sleep(0.2)
    built = time.time() - start
    print(f"other visitors loaded {len(train)} pages; the site dictionary was ready {built:.1f} s later")
    print()
    print(f"{'sequence':<8} | {'coding, deltas':<21} | {'pages':>5} | {'identity':>9} | {'br 11':>9} | "
          f"{'first (br)':>10} | {'dict (br)':>9} | {'deltas':>9} | {'total':>9} | ratio")
    worst = 0.0
    for name, sequence in (("spread", spread), ("next", ordered)):
        identity = sum(os.path.getsize(ROOT + p) for p in sequence)
        br = 0
        for path in sequence:
            with open(ROOT + path, "rb") as page:
                br += len(run(["brotli", "-q", "11", "-c"], page.read()))
        rows, plain = {}, {}
        for visitor in ("first", "later"):
            if visitor == "later":
                # A dcz miss is streamed, not kept as a delta: the first hit makes it.
                visit(sequence, "dcz")
                settle()
            plain[visitor] = visit_plain(sequence)
            for coding in CODINGS:
                rows[(coding, visitor)] = visit(sequence, coding)
        for visitor, label in (("first", "request path"), ("later", "from cache")):
            total = plain[visitor]
            print(f"{name:<8} | {'none, ' + label:<21} | {len(sequence):>5} | {identity:>9} | "
                  f"{br:>9} | {'':>10} | {'':>9} | {'':>9} | {total:>9} | {total / br:.3f}")
        for coding in CODINGS:
            for visitor, label in (("first", "request path"), ("later", "from cache")):
                sent, size = rows[(coding, visitor)]
                total = sent["first"] + sent["dictionary"] + sent["pages"]
                ratio = total / br
                if visitor == "later" and coding == CHROMIUM:
                    worst = max(worst, ratio)
                print(f"{name:<8} | {coding.replace(', ', '+') + ', ' + label:<21} | {len(sequence):>5} | {identity:>9} | "
                      f"{br:>9} | {sent['first']:>10} | {sent['dictionary']:>9} | {sent['pages']:>9} | "
                      f"{total:>9} | {ratio:.3f}")
    print()
    print(f"dictionary: {size} bytes. total = the first page in br (the browser has no dictionary yet) + "
          f"the dictionary in br + the other {len(spread) - 1} pages as deltas; ratio = total / brotli 11 of "
          f"all {len(spread)} pages. Worst ratio from the cache for Chromium ({CHROMIUM}): {worst:.3f}.")
    print(json.dumps(stats()))


main()
