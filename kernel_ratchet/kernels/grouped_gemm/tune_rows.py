"""What the grouped GEMM's sweeps (:mod:`.tune`, :mod:`.tune_fp8`) share: one timed row per
candidate, and which candidates a sweep takes."""

from __future__ import annotations

import sys

from kernel_ratchet.kernels.benchmarking import tflops, time_ms
from kernel_ratchet.kernels.grouped_gemm.configs import TileConfig


def time_row(label: str, name: str, fn, flop: float, mrt: float) -> tuple:
    """(shape, candidate, ms, TFLOP/s) of ``fn``; a candidate that raises (does not compile,
    does not fit) is a row of NaN, said on stderr, not a crash of the sweep."""
    try:
        ms, _ = time_ms(fn, mrt)
    except Exception as exc:  # a config that does not compile is a result, not a crash
        print(f"# {label} {name}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        ms = float("nan")
    return (label, name, ms, tflops(flop, ms))


def pick(candidates: dict[str, TileConfig], only: tuple[str, ...]) -> dict[str, TileConfig]:
    """The shipped buckets and the candidates whose name holds one of ``only`` (all if empty)."""
    return {
        k: v
        for k, v in candidates.items()
        if not only or k.startswith(("shipped:", "dgrad shipped:")) or any(o in k for o in only)
    }
