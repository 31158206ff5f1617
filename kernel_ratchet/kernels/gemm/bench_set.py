"""``bench --set``: the side-by-side table of :mod:`.compare` (bf16 ours against cuBLAS, the
FP8 Linear against the bf16 path) on a shape set, and the FP8 dispatch table it can write.
The options are :func:`.bench.parse_args`'s."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels.benchmarking import GRAPH_CALLS, graph_rounds, time_rounds
from kernel_ratchet.kernels.gemm import compare as cmp
from kernel_ratchet.kernels.gemm import dispatch as dsp

#: What a side-by-side table's times are, by ``--timing``.
TIMING = {
    "wall": "Times: back-to-back calls on the host's clock (torch.utils.benchmark medians), "
    "each call's host work included: a row whose calls launch slower than the GPU runs "
    "them measures the host.",
    "graph": f"Times: GPU time per call, {GRAPH_CALLS} calls captured in a CUDA graph and "
    "replayed between CUDA events (medians), the host's launch work left out, L2 warm.",
}

#: 16-bit inputs of the side-by-side table: the interpreter's bf16 ``tl.dot`` is wrong.
_LINEAR_DTYPE = {"cuda": torch.bfloat16, "cpu": torch.float16}


def run_set(args: argparse.Namespace, shapes: list[Shape]) -> int:
    """The side-by-side table of :mod:`.compare` on ``shapes``; exit 1 when a shape fails.
    With ``--fill-dispatch`` the table written from these rows decides their dispatched
    column."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for shape in shapes:
        try:
            timer = _timer(args.min_run_time, args.rounds, args.timing)
            row = cmp.measure(shape, args.granularity, timer, device, _LINEAR_DTYPE[device])
        except Exception as exc:  # a failing shape is a FAIL row, not a crash of the table
            row = cmp.failed(shape, exc)
        rows.append(row)
        print(row.markdown(), flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()
    if args.fill_dispatch:
        table = cmp.dispatch_table(
            rows, args.granularity, measuring_command(args.argv, args.rounds)
        )
        mine = dsp.write_run(Path(args.fill_dispatch), table, args.merge)  # this GPU's part
        print(f"dispatch table: {len(mine.rows)} shapes -> {args.fill_dispatch}")
        rows = [cmp.redispatch(r, mine, args.granularity) for r in rows]
    lines = [cmp.HEADER, "|" + "---|" * cmp.HEADER.count(" | ") + "---|"]
    lines += [r.markdown() for r in rows] + ["", cmp.summary(rows), "", TIMING[args.timing]]
    if not args.fill_dispatch:  # the decisions in the table are the shipped table's
        fill = "python -m kernel_ratchet.kernels.gemm.bench --set dispatch --fill-dispatch PATH"
        note = dsp.measured_elsewhere(dsp.load_table(dsp.TABLE_PATH), cmp.versions(), fill)
        lines += ["", note] if note else []
    print("\n".join(lines))
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
    return 0 if all(r.ok for r in rows) else 1


def measuring_command(
    argv: list[str], rounds: int, module: str = "kernel_ratchet.kernels.gemm.bench"
) -> str:
    """The command that measured a table (``python -m module argv``), without where it wrote
    its markdown (``-o``), with its rounds per cell even where they were the default (a default
    may change)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("-o", "--output"):
            skip = True
        elif not arg.startswith(("-o", "--output=")):
            kept.append(arg)
    if not any(a == "--rounds" or a.startswith("--rounds=") for a in kept):
        kept += ["--rounds", str(rounds)]
    return " ".join(["python -m", module, *kept])


def _timer(
    min_run_time: float, rounds: int, timing: str = "wall"
) -> Callable[[dict], dict[str, float]]:
    if timing == "graph":
        return lambda fns: graph_rounds(fns, min_run_time, rounds)
    return lambda fns: time_rounds(fns, min_run_time, rounds)
