"""How well each measured quantity resolves a short op: per-shape A/A CI half-widths.

For a norm-like bf16 forward+backward (RMS norm, 4096x2048) and a bf16 GEMM (8192x4096x4096),
under each quantity of :mod:`kernel_ratchet.harness.timing.quantity` (``kernel_time`` cold and
warm L2, ``step_time``), times the same op as two sides in shuffled order for ``--rounds``
rounds with the paired A/B's timing parameters (2 samples of ~50 ms per timed call), in this
process. Reports per op and quantity: the median per-call time, the mode (graph or eager, and
a capture fallback), the spread of one round's log ratio, and the half-width of the 95%
percentile-bootstrap CI of the median per-round ratio (the A/B's per-shape statistic, before
its Bonferroni split)::

    python -m kernel_ratchet.method.quantity_probe --rounds 10 -o quantity_probe.json

Needs a CUDA GPU; about two minutes on an H200 at 10 rounds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.timing.cuda_events import CudaEventEngine
from kernel_ratchet.harness.timing.quantity import Measure
from kernel_ratchet.kernels.benchmarking import output_file

MEASURES = {
    "kernel_time/cold": Measure("kernel_time", "cold"),
    "kernel_time/warm": Measure("kernel_time", "warm"),
    "step_time": Measure("step_time", "warm"),
}
#: The paired A/B's timing per side and round, with a shorter clock settling (a probe budget).
TIMING = {"samples": 2, "sample_ms": 50.0, "settle_max_ms": 300.0}


def norm_fwd_bwd(m: int = 4096, n: int = 2048) -> Callable[[], Any]:
    """RMS norm forward and backward in bf16 (a norm-like memory-bound op)."""
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)

    def step() -> Any:
        y = torch.nn.functional.rms_norm(x, (n,), w, eps=1e-6)
        return torch.autograd.grad(y, (x, w), g)

    return step


def gemm(m: int = 8192, n: int = 4096, k: int = 4096) -> Callable[[], Any]:
    """A bf16 GEMM (M x K) @ (K x N)."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    return lambda: a @ b


OPS = {"norm_fwd_bwd 4096x2048": norm_fwd_bwd, "gemm 8192x4096x4096": gemm}


def ci_half_width(ratios: np.ndarray, rng: np.random.Generator, n_boot: int = 2000) -> float:
    """Half-width of the 95% percentile-bootstrap CI of the median ratio, as a fraction."""
    idx = rng.integers(0, len(ratios), size=(n_boot, len(ratios)))
    meds = np.median(ratios[idx], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float((hi - lo) / 2)


def probe(
    op: Callable[[], Any],
    m: Measure,
    rounds: int,
    rng: np.random.Generator,
    timing: dict[str, float] | None = None,
) -> dict:
    """A/A rounds of one op under one quantity: times, mode, spread and CI half-width.
    ``timing``: the engine's samples per call and their length (default :data:`TIMING`)."""
    timing = {**TIMING, **(timing or {})}
    sides = [CudaEventEngine(**timing, **m.to_dict()) for _ in range(2)]
    times: list[list[float]] = [[], []]
    details, flags = {}, set()
    for _ in range(rounds):
        for side in rng.permutation(2):
            t = sides[side].measure(op)
            times[side].append(t.median_ms)
            details, flags = t.details, flags | set(t.flags)
    ratios = np.array(times[0]) / np.array(times[1])
    return {
        "median_ms": float(np.median(times[0] + times[1])),
        "mode": details.get("mode"),
        "fallback": details.get("fallback"),
        "flags": sorted(flags),
        "round_spread_pct": float(np.std(np.log(ratios), ddof=1) * 100),
        "ci_half_width_pct": ci_half_width(ratios, rng) * 100,
        "rounds": rounds,
        "timing": timing,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="A/A rounds per op and quantity")
    ap.add_argument(
        "-o", "--output", type=lambda p: Path(output_file(p)), default=Path("quantity_probe.json")
    )
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated op names (default all)")
    ap.add_argument("--quantities", default=",".join(MEASURES), help="comma-separated quantities")
    ap.add_argument("--samples", type=int, default=int(TIMING["samples"]), help="samples per call")
    ap.add_argument("--sample-ms", type=float, default=TIMING["sample_ms"], help="ms per sample")
    args = ap.parse_args(argv)
    ops = {k: OPS[k] for k in args.ops.split(",") if k in OPS}
    measures = {k: MEASURES[k] for k in args.quantities.split(",") if k in MEASURES}
    timing = {"samples": args.samples, "sample_ms": args.sample_ms}
    if not torch.cuda.is_available():
        print("quantity_probe needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.rounds < 3:
        print("--rounds must be at least 3", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    if not ops or not measures:
        print(f"unknown --ops or --quantities; ops: {list(OPS)}, quantities: {list(MEASURES)}")
        return 2
    for name, make in ops.items():
        op = make()
        for label, m in measures.items():
            try:
                res = probe(op, m, args.rounds, rng, timing)
            except RatchetError as exc:  # a quantity this op cannot be measured by: said
                out[f"{name} | {label}"] = {"error": str(exc)}
                print(f"{name:26s} {label:17s} error: {exc}", flush=True)
                continue
            out[f"{name} | {label}"] = res
            print(
                f"{name:26s} {label:17s} {res['median_ms'] * 1e3:9.2f} us  {res['mode']:5s}  "
                f"round spread {res['round_spread_pct']:.2f}%  "
                f"CI half-width {res['ci_half_width_pct']:.2f}%",
                flush=True,
            )
            args.output.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
