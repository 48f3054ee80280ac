"""The visitors of bench/site_dictionary.sh: python3 site_dictionary.py PYDOC PROXY_PORT
ADMIN_PORT WARMUP. Prints the table; exits non-zero when a body does not decode to its file
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

ROOT, PORT, ADMIN, WARMUP = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
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


def visit(sequence, coding):
    """One visitor: bytes of the first page, the dictionary, and each page of the sequence."""
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
        for path in sequence:
            response, body = get(path, {
                "Accept-Encoding": f"br, {coding}",
                "Available-Dictionary": hash_field,
                "Sec-Fetch-Site": "same-origin",
                "Sec-Fetch-Mode": "navigate",
                "Sec-Fetch-Dest": "document",
            })
            if response.getheader("Content-Encoding") != coding:
                sys.exit(f"{path} came as {response.getheader('Content-Encoding')}, not {coding}")
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
    print(f"{'sequence':<8} | {'visitor':<20} | {'pages':>5} | {'identity':>9} | {'br 11':>9} | "
          f"{'dict (br)':>9} | {'deltas':>9} | {'first page':>10} | {'total':>9} | ratio")
    worst = 0.0
    for name, sequence in (("spread", spread), ("next", ordered)):
        identity = sum(os.path.getsize(ROOT + p) for p in sequence)
        br = 0
        for path in sequence:
            with open(ROOT + path, "rb") as page:
                br += len(run(["brotli", "-q", "11", "-c"], page.read()))
        for coding in ("dcz", "dcb"):
            for visitor in ("first (request path)", "later (from cache)"):
                if visitor.startswith("later"):
                    time.sleep(WARMUP)
                sent, size = visit(sequence, coding)
                # The first page is one of the sequence: count the delta, plus its br
                # announcement only as the Link it carries (its body is in the deltas).
                total = sent["pages"] + sent["dictionary"]
                ratio = total / br
                if visitor.startswith("later"):
                    worst = max(worst, ratio)
                print(f"{name:<8} | {coding + ' ' + visitor:<20.20} | {len(sequence):>5} | {identity:>9} | "
                      f"{br:>9} | {sent['dictionary']:>9} | {sent['pages']:>9} | {sent['first']:>10} | "
                      f"{total:>9} | {ratio:.3f}")
    print()
    print(f"dictionary: {size} bytes; ratio = (deltas + the dictionary's download) / brotli 11 of the "
          f"same pages. {json.dumps(stats())}")


main()
