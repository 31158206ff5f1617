"""Kernel time breakdown of one op on one shape (the ANALYZE step): which kernels the forward
and the backward launch, and how the time splits between them.

Runs in its own process, in the project tree (``--root`` first on ``sys.path``), so the
campaign driver never imports the project's kernels:

    python -m kernel_ratchet.harness.breakdown --root R --adapter MOD:CLS --shape JSON \
        --device cuda --out breakdown.json [--iters 3]
    ncu ... python -m kernel_ratchet.harness.breakdown ... --ncu-target   # see campaign.profiling

Method: the adapter's case for the shape (seed 0), each phase run twice to warm up (compile,
caches), then ``--iters`` calls of the phase under ``torch.profiler`` (CPU and CUDA
activities), one profiler session per phase. On CUDA: the device activities of the trace
(kernels, memcpy, memset; not the annotations of the ops that launched them, which would count
each kernel twice), per call of the phase. On the CPU: self time per op (the interpreter makes
it meaningless for tuning). With ``--ncu-target`` the phases are warmed up, then run once each
between ``cudaProfilerStart`` and ``cudaProfilerStop``, for Nsight Compute
(``--profile-from-start off``) to profile those launches alone: that capture is process-wide,
so it holds the backward's kernels, which autograd launches from its own thread (an NVTX
push/pop range holds only its thread's).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: Kernels listed per phase (the rest are summed into "other").
TOP = 12
#: Trace event categories of device work (torch.profiler's Chrome trace).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


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


def device_rows(trace: dict[str, Any]) -> list[tuple[str, int, float]]:
    """(name, calls, total µs) per kernel of a torch.profiler Chrome trace: device work only.
    Ops' annotations on the GPU timeline (``gpu_user_annotation``), runtime calls and the
    profiler's own overhead are left out."""
    by: dict[str, list[float]] = {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES:
            by.setdefault(str(e.get("name", "?")), []).append(float(e.get("dur", 0.0)))
    return [(name, len(d), sum(d)) for name, d in by.items()]


def _device_rows(prof: Any) -> list[tuple[str, int, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return device_rows(json.loads(path.read_text()))


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
        if cuda:
            rows = _device_rows(prof)
        else:
            rows = [(e.key, e.count, e.self_cpu_time_total) for e in prof.key_averages()]
        phases[name] = kernel_table(rows, iters)
    how = (
        "device time per kernel (torch.profiler trace: kernels, memcpy, memset)"
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
    torch.cuda.profiler.start()
    for fn in run.values():
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


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
    sys.argv = sys.argv[:1]  # the op's code, imported next, sees no argument of ours
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
