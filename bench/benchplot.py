"""The plot every Python bench script draws beside its table (bench/cli.py, bench/tunnel.py)."""

import os
import subprocess


def plot(kind, header, rows, zipwire):
    """Writes `rows` tab-separated beside $PLOT (default <kind>.svg; PLOT= for none) and draws
    them with `zipwire bench plot`."""
    svg = os.environ.get("PLOT", f"{kind}.svg")
    if not svg:
        return
    tsv = os.path.splitext(svg)[0] + ".tsv"
    with open(tsv, "w") as f:
        f.write("\t".join(header) + "\n")
        for row in rows:
            f.write("\t".join(str(cell) for cell in row) + "\n")
    subprocess.run([zipwire, "bench", "plot", kind, tsv, "-o", svg], check=True)
