"""Markdown tables for docs/benchmarks.md from the GEMM benchmark CSVs (with vendor columns).

    python -m kernel_ratchet.kernels.gemm.docs_table TITLE=path.csv [TITLE=path.csv ...]

Prints, per CSV, a per-shape table (ours vs vendor, forward / backward / combined step
TFLOPS, ratios, SNR) and a geomean line over PASS rows.
"""

from __future__ import annotations

import csv
import math
import sys


def _f(x: str) -> float:
    try:
        return float(x)
    except ValueError:
        return math.nan


def _geo(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def table(title: str, path: str) -> str:
    """One markdown section for one benchmark CSV."""
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    vendor = rows[0].get("vendor", "none") if rows else "none"
    lines = [
        f"#### {title}",
        "",
        f"| shape | M | N | K | check | fwd | {vendor} fwd | fwd ratio | bwd | {vendor} bwd "
        "| bwd ratio | step | vendor step | step ratio | out/da/db SNR dB |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    cols = (
        "Forward TFLOPS",
        "Vendor Forward TFLOPS",
        "fwd_ratio",
        "Backward TFLOPS",
        "Vendor Backward TFLOPS",
        "bwd_ratio",
        "Step TFLOPS",
        "Vendor Step TFLOPS",
        "step_ratio",
    )
    for r in rows:
        cells = [
            f"{_f(r.get(c, '')):.3f}" if "ratio" in c else f"{_f(r.get(c, '')):.0f}" for c in cols
        ]
        snr = "/".join(f"{_f(r[c]):.1f}" for c in ("out_snr", "da_snr", "db_snr"))
        lines.append(
            f"| {r['label']} | {r['M']} | {r['N']} | {r['K']} | {r['Check']} | "
            + " | ".join(cells)
            + f" | {snr} |"
        )
    ok = [r for r in rows if r["Check"] == "PASS"]
    geo = [_geo([_f(r.get(c, "")) for r in ok]) for c in cols]
    lines.append(
        f"| **geomean** ({len(ok)}/{len(rows)} PASS) | | | | | "
        + " | ".join(
            f"**{g:.3f}**" if "ratio" in c else f"**{g:.0f}**"
            for g, c in zip(geo, cols, strict=True)
        )
        + " | |"
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    for spec in argv:
        title, path = spec.split("=", 1)
        print(table(title, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
