"""The roofline of a round's measured shapes against a device's ceilings (pure functions).

:class:`Ceilings` holds a device's measured peaks (matrix TFLOPS per dtype, copy bandwidth);
measuring them is the campaign's job (:mod:`kernel_ratchet.campaign.analyze`). For each PASS
row of a benchmark CSV :func:`analyze_table` derives the FLOPs (the row's own forward TFLOPS
times its time: the harness counted them with the adapter's ``flops``, which knows a grouped
GEMM's M is all groups' rows; 2·M·N·K·B where the row lacks them), the bytes from the
adapter's ``bytes_moved``, the arithmetic intensity, the attainable roofline, the
bound (compute / memory / latency) and the fraction of the roofline reached;
:func:`efficiency` aggregates those fractions into the number T2 reads.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.metrics import geomean

#: A forward under this many milliseconds is launch/latency bound whatever its intensity.
LATENCY_MS = 0.01


def _now() -> str:
    return _dt.datetime.now().strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one device. ``matrix_tflops`` per dtype name ("bf16", "fp8", ...)."""

    device: str
    label: str  # "GPU" or "CPU (the Triton interpreter: ...)"
    matrix_tflops: dict[str, float]
    copy_gbps: float
    measured: str = field(default_factory=_now)


def peak_for(c: Ceilings, dtype: str) -> float:
    """The matrix peak for ``dtype`` (fp8 falls back to 2x bf16, unknown dtypes to fp32)."""
    if dtype in c.matrix_tflops:
        return c.matrix_tflops[dtype]
    if dtype == "fp8" and "bf16" in c.matrix_tflops:
        return 2 * c.matrix_tflops["bf16"]
    return c.matrix_tflops.get("fp32") or max(c.matrix_tflops.values(), default=math.nan)


def shape_roofline(
    flops: float, nbytes: float | None, ms: float, peak_tflops: float, gbps: float
) -> dict[str, Any]:
    """Roofline of one timed call: achieved TFLOPS, intensity, bound and efficiency (0..1+)."""
    achieved = flops / (ms * 1e-3) / 1e12 if ms > 0 else math.nan
    if nbytes:
        intensity = flops / nbytes
        roof = min(peak_tflops, intensity * gbps / 1e3)
        bound = "compute" if intensity * gbps / 1e3 >= peak_tflops else "memory"
    else:
        intensity, roof, bound = None, peak_tflops, "compute"
    if ms < LATENCY_MS:
        bound = "latency"
    return {
        "achieved_tflops": achieved,
        "intensity": intensity,
        "roofline_tflops": roof,
        "bound": bound,
        "efficiency": achieved / roof if roof else math.nan,
    }


def op_dtype(adapter: Any, op: str) -> str:
    """The dtype name whose matrix peak bounds ``op``: fp8 by name or granularity, else the
    adapter's ``dtype`` (bf16, fp16), else fp32."""
    if "fp8" in op.lower() or hasattr(adapter, "granularity"):
        return "fp8"
    dt = str(getattr(adapter, "dtype", "float32"))  # a torch.dtype prints as torch.bfloat16
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(dt, "fp32")


def _bytes_moved(adapter: Any, shape: Shape) -> float | None:
    if adapter is None:
        return None
    try:
        return float(adapter.bytes_moved(shape)[0]) or None
    except Exception:  # noqa: BLE001 - a user adapter; the roofline degrades to flops
        return None


def _flops(r: Any) -> float:
    """A row's forward FLOPs as the harness counted them (TFLOPS x ms), else 2·M·N·K·B."""
    if r.fwd > 0 and r.fwd_ms > 0 and math.isfinite(r.fwd * r.fwd_ms):
        return r.fwd * 1e12 * r.fwd_ms * 1e-3
    return 2.0 * r.M * r.N * r.K * r.B


def analyze_table(
    table: BenchTable,
    ceil: Ceilings,
    *,
    adapter: Any = None,
    op: str = "",
    memory: bool = False,
    dtype: str | None = None,
    nbytes: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Per-shape roofline of the PASS rows of ``table``; ``memory`` for GB/s schemas.
    ``dtype`` and ``nbytes`` (bytes moved per shape label) replace what the adapter would say,
    for a reader of recorded analyses that does not import the project's adapter."""
    dtype = dtype or op_dtype(adapter, op)
    peak = peak_for(ceil, dtype)
    shapes = []
    for r in table.rows:
        if not r.passed:
            continue
        shape = Shape(r.label, M=r.M, N=r.N, K=r.K, B=r.B)
        moved = _bytes_moved(adapter, shape) if nbytes is None else nbytes.get(r.label)
        if memory:
            eff = r.fwd / ceil.copy_gbps if ceil.copy_gbps else math.nan
            row = {
                "achieved_gbps": r.fwd,
                "roofline_gbps": ceil.copy_gbps,
                "bound": "memory",
                "efficiency": eff,
            }
        else:
            flops = _flops(r)
            row = shape_roofline(flops, moved, r.fwd_ms, peak, ceil.copy_gbps)
        shapes.append({"label": r.label, "M": r.M, "N": r.N, "K": r.K, "B": r.B, **row})
    return {
        "written": _now(),
        "device": ceil.device,
        "label": ceil.label,
        "dtype": dtype,
        "peak_tflops": peak,
        "copy_gbps": ceil.copy_gbps,
        "shapes": shapes,
        "efficiency": efficiency({"shapes": shapes}),
    }


def efficiency(analysis: dict[str, Any]) -> float:
    """Geometric mean of the per-shape fractions of the measured roofline (NaN: no shape).
    This is the T2 number: ``efficiency(a) >= efficiency_target`` ends the campaign."""
    vals = [s.get("efficiency") for s in analysis.get("shapes", [])]
    vals = [v for v in vals if v and math.isfinite(v) and v > 0]
    return geomean(vals) if vals else math.nan


def render_md(n: int, a: dict[str, Any]) -> str:
    """The roofline section of ``analysis.md`` before round ``n``."""
    lines = [
        f"# Analysis before round-{n} ({a['written']})",
        "",
        f"Device: {a['device']} — {a['label']}. Matrix peak ({a['dtype']}): "
        f"{a['peak_tflops']:.3g} TFLOPS; copy bandwidth {a['copy_gbps']:.3g} GB/s.",
        "",
        "| Shape | Bound | Achieved | Roofline | Efficiency |",
        "|---|---|---|---|---|",
    ]
    for s in sorted(a["shapes"], key=lambda s: s["efficiency"]):
        ach = s.get("achieved_tflops", s.get("achieved_gbps"))
        roof = s.get("roofline_tflops", s.get("roofline_gbps"))
        lines.append(
            f"| {s['label']} | {s['bound']} | {ach:.4g} | {roof:.4g} | "
            f"{s['efficiency'] * 100:.1f}% |"
        )
    eff = a["efficiency"]
    agg = f"{eff * 100:.2f}%" if math.isfinite(eff) else "-"
    agg = agg if a["shapes"] else "none: no shape passes"
    lines += ["", f"Aggregate efficiency (geomean): {agg}", ""]
    return "\n".join(lines)
