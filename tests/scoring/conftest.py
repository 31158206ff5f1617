"""Small benchmark CSV texts, parsed with the one reader (csv_schema.parse_csv_text)."""

from __future__ import annotations

from kernel_ratchet.harness.csv_schema import GEMM_HEADER, MEMORY_HEADER, BenchTable, parse_csv_text


def gemm_row(
    label, m, n, k, fwd, fwd_std=0.0, bwd="", bwd_std="", *, b=1, check="PASS", fwd_ms="", bwd_ms=""
):
    """One GEMM CSV line; times default to the ones implied by the TFLOPS (B·2MNK / time)."""
    if fwd_ms == "" and fwd not in ("", None):
        fwd_ms = b * 2 * m * n * k / (fwd * 1e12) * 1e3
    if bwd_ms == "" and bwd not in ("", None):
        bwd_ms = b * 4 * m * n * k / (bwd * 1e12) * 1e3
    cells = [label, b, m, n, k, check, fwd, fwd_std, bwd, bwd_std, fwd_ms, bwd_ms, 40, 40, 40]
    return ",".join("" if c is None else str(c) for c in cells)


def gemm_table(*rows: str) -> BenchTable:
    return parse_csv_text("\n".join([GEMM_HEADER, *rows]) + "\n")


def memory_table(*rows: str) -> BenchTable:
    return parse_csv_text("\n".join([MEMORY_HEADER, *rows]) + "\n")


def fwd_table(values: dict[str, float], rel_std: float = 0.005, check: dict | None = None):
    """A forward-only GEMM table: label -> Forward TFLOPS, every std = rel_std · value."""
    sizes = [256, 512, 1024, 2048, 4096, 8192, 16384]
    rows = []
    for i, (label, v) in enumerate(values.items()):
        s = sizes[i % len(sizes)]
        rows.append(
            gemm_row(label, s, s, s, v, v * rel_std, check=(check or {}).get(label, "PASS"))
        )
    return gemm_table(*rows)
