"""Kernel time breakdown of one op on one shape (the ANALYZE step): which kernels the forward
and the backward launch, and how the time splits between them.

Runs in its own process, in the project tree (``--root`` first on ``sys.path``), so the
campaign driver never imports the project's kernels:

    python -m kernel_ratchet.harness.breakdown --root R --adapter MOD:CLS --shape JSON \
        --device cuda --out breakdown.json [--iters 3]
    ncu ... python -m kernel_ratchet.harness.breakdown ... --ncu-target   # see campaign.profiling

Method: the adapter's case for the shape (seed 0), each phase run twice to warm up (compile,
caches), then ``--iters`` calls of the phase under ``torch.profiler`` (CPU and CUDA
activities), one profiler session per phase. Per kernel: device self time on CUDA (CPU self
time on the CPU, where the interpreter makes it meaningless for tuning), per call of the phase.
With ``--ncu-target`` the phases are warmed up, then run once each inside the NVTX ranges
``ratchet_fwd`` / ``ratchet_bwd``, for Nsight Compute to profile those launches alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: Kernels listed per phase (the rest are summed into "other").
TOP = 12
NVTX = {"fwd": "ratchet_fwd", "bwd": "ratchet_bwd"}


def kernel_table(rows: Sequence[tuple[str, int, float]], iters: int) -> dict[str, Any]:
    """``rows`` = (name, calls, total µs) over ``iters`` calls of a phase -> the phase's
    table: the kernels by time, each with calls and ms per call of the phase and its share."""
    rows = sorted((r for r in rows if r[2] > 0), key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    kernels = [
        {"name": name[:120], "calls": calls / iters, "ms": us / 1e3 / iters, "share": us / total}
        for name, calls, us in rows[:TOP]
    ]
    rest = rows[TOP:]
    if rest:
        us = sum(r[2] for r in rest)
        kernels.append(
            {
                "name": f"other ({len(rest)} kernels)",
                "calls": sum(r[1] for r in rest) / iters,
                "ms": us / 1e3 / iters,
                "share": us / total,
            }
        )
    return {"total_ms": total / 1e3 / iters, "kernels": kernels}


def _phases(adapter: Any, case: Any) -> dict[str, Callable[[], Any]]:
    run = {"fwd": lambda: adapter.forward(case)}
    if adapter.has_backward:
        run["bwd"] = lambda: adapter.backward(case)
    return run


def profile(adapter: Any, shape: Any, device: str, iters: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity

    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    case = adapter.make_case(shape, 0, device)
    run = _phases(adapter, case)
    for fn in run.values():  # forward before backward: a backward may need its state
        fn()
        fn()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    phases = {}
    for name, fn in run.items():
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(iters):
                fn()
            sync()
        attr = "self_device_time_total" if cuda else "self_cpu_time_total"
        rows = [(e.key, e.count, float(getattr(e, attr, 0.0))) for e in prof.key_averages()]
        phases[name] = kernel_table(rows, iters)
    how = (
        "device self time per kernel (torch.profiler, CUDA activity)"
        if cuda
        else "CPU self time per op (torch.profiler; Triton interpreter: meaningless for tuning)"
    )
    return {
        "shape": shape.to_dict(),
        "device": device,
        "iters": iters,
        "phases": phases,
        "method": f"{how}; {iters} calls per phase after 2 warm-up calls, per call of the phase",
    }


def ncu_target(adapter: Any, shape: Any) -> None:
    import torch

    case = adapter.make_case(shape, 0, "cuda")
    run = _phases(adapter, case)
    for fn in run.values():
        fn()
    torch.cuda.synchronize()
    for name, fn in run.items():
        torch.cuda.nvtx.range_push(NVTX[name])
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="the project tree (first on sys.path)")
    p.add_argument("--adapter", required=True, help="MOD:CLS, as in ratchet.yaml")
    p.add_argument("--shape", required=True, help="one target shape as JSON")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--out", type=Path, help="breakdown JSON (not with --ncu-target)")
    p.add_argument("--ncu-target", action="store_true", help="run once per phase for ncu")
    args = p.parse_args(argv)
    sys.path.insert(0, args.root)
    from kernel_ratchet.harness.adapter import Shape, load_adapter

    adapter = load_adapter(args.adapter)
    shape = Shape.from_dict(json.loads(args.shape))
    if args.ncu_target:
        ncu_target(adapter, shape)
        return 0
    if args.out is None:
        p.error("--out is required without --ncu-target")
    result = profile(adapter, shape, args.device, args.iters)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
