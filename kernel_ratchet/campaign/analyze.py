"""ANALYZE: a roofline per shape from ceilings measured on this machine.

Ceilings (matrix peak per dtype with ``torch.matmul`` / ``torch._scaled_mm``, copy bandwidth
with a large device copy) are measured once per campaign (one GPU) and cached as
``<campaign>/profiles/ceilings.json``; on a machine without a GPU they are measured on the
CPU and labelled so (a rehearsal: the numbers say nothing about a GPU). For each PASS row of a
round's CSV: FLOPs (the CSV's own TFLOPS times its time, i.e. 2·M·N·K·B forward), bytes from
the adapter's ``bytes_moved``, arithmetic intensity, the attainable roofline, the bound
(compute / memory / latency) and the fraction of the roofline reached. Written to
``profiles/round-N/analysis.json`` and ``analysis.md``; :func:`efficiency` is what T2 reads.
Then the incumbent's kernel time breakdown (torch.profiler, and Nsight Compute metrics where
ncu works) on the least efficient representative shape: :mod:`kernel_ratchet.campaign.profiling`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text
from kernel_ratchet.campaign.profiling import profile_incumbent
from kernel_ratchet.campaign.profiling import render_md as profile_md
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.metrics import geomean

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign

#: A forward under this many milliseconds is launch/latency bound whatever its intensity.
LATENCY_MS = 0.01


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one device. ``matrix_tflops`` per dtype name ("bf16", "fp8", ...)."""

    device: str
    label: str  # "GPU" or "CPU (rehearsal: meaningless for tuning)"
    matrix_tflops: dict[str, float]
    copy_gbps: float
    measured: str = field(default_factory=now)


def _timed(fn, reps: int, sync) -> float:
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def measure_ceilings(device: str | None = None) -> Ceilings:
    """Measure the matrix peak per dtype and the copy bandwidth on ``device`` (default: cuda
    when available, else cpu). Seconds on a GPU, about a second on a CPU."""
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = dev.startswith("cuda")
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    n, reps = (8192, 20) if gpu else (384, 3)
    peaks: dict[str, float] = {}
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    for name, dt in dtypes.items():
        try:
            a, b = torch.randn(n, n, device=dev).to(dt), torch.randn(n, n, device=dev).to(dt)
            peaks[name] = 2 * n**3 / _timed(lambda a=a, b=b: a @ b, reps, sync) / 1e12
        except RuntimeError:
            continue
    if gpu and hasattr(torch, "_scaled_mm"):
        try:
            a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=dev)
            fn = lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)  # noqa: E731
            peaks["fp8"] = 2 * n**3 / _timed(fn, reps, sync) / 1e12
        except (RuntimeError, TypeError):
            pass
    nbytes = (1 << 30) if gpu else (64 << 20)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    secs = _timed(lambda: dst.copy_(src), 10 if gpu else 3, sync)
    name = torch.cuda.get_device_name(0) if gpu else "cpu"
    label = "GPU" if gpu else "CPU (rehearsal: meaningless for tuning)"
    return Ceilings(name, label, peaks, 2 * nbytes / secs / 1e9)


def ceilings(campaign_dir: Path, *, refresh: bool = False) -> Ceilings:
    """The campaign's ceilings, measured on first use and cached in
    ``<campaign>/profiles/ceilings.json`` (one campaign = one GPU; the campaign root itself
    holds only campaign directories)."""
    path = Path(campaign_dir) / "profiles" / "ceilings.json"
    if path.exists() and not refresh:
        return Ceilings(**json.loads(path.read_text()))
    c = measure_ceilings()
    atomic_write_json(path, asdict(c))
    return c


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


def _op_dtype(adapter: Any, op: str) -> str:
    if "fp8" in op.lower() or hasattr(adapter, "granularity"):
        return "fp8"
    dt = getattr(adapter, "dtype", torch.float32)
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dt, "fp32")


def analyze_table(
    table: BenchTable, ceil: Ceilings, *, adapter: Any = None, op: str = "", memory: bool = False
) -> dict[str, Any]:
    """Per-shape roofline of the PASS rows of ``table``; ``memory`` for GB/s schemas."""
    dtype = _op_dtype(adapter, op)
    peak = peak_for(ceil, dtype)
    shapes = []
    for r in table.rows:
        if not r.passed:
            continue
        shape = Shape(r.label, M=r.M, N=r.N, K=r.K, B=r.B)
        nbytes = None
        if adapter is not None:
            try:
                nbytes = float(adapter.bytes_moved(shape)[0]) or None
            except Exception:  # noqa: BLE001 - a user adapter; the roofline degrades to flops
                nbytes = None
        if memory:
            eff = r.fwd / ceil.copy_gbps if ceil.copy_gbps else math.nan
            row = {
                "achieved_gbps": r.fwd,
                "roofline_gbps": ceil.copy_gbps,
                "bound": "memory",
                "efficiency": eff,
            }
        else:
            flops = 2.0 * r.M * r.N * r.K * r.B
            row = shape_roofline(flops, nbytes, r.fwd_ms, peak, ceil.copy_gbps)
        shapes.append({"label": r.label, "M": r.M, "N": r.N, "K": r.K, "B": r.B, **row})
    return {
        "written": now(),
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
    lines += ["", f"Aggregate efficiency (geomean): {a['efficiency'] * 100:.2f}%", ""]
    return "\n".join(lines)


def _adapter(c: Campaign) -> Any:
    from kernel_ratchet.harness.adapter import load_adapter

    sys.path.insert(0, str(c.root))
    try:
        return load_adapter(c.m.adapter)
    except Exception:  # noqa: BLE001 - analysis is advisory; no adapter, no bytes
        return None
    finally:
        sys.path.remove(str(c.root))


def analyze_campaign(c: Campaign, n: int) -> dict[str, Any]:
    """ANALYZE before round ``n``: the incumbent's latest CSV against the ceilings; writes
    ``profiles/round-<n>/analysis.{json,md}`` and returns the analysis."""
    ceil = ceilings(c.dir)
    rel = c.state.incumbent_quick_csv or c.state.incumbent_full_csv
    table = c.table(rel)
    a = analyze_table(
        table, ceil, adapter=_adapter(c), op=c.m.target_op, memory=c.m.campaign_type == "memory"
    )
    a["source_csv"] = rel
    out = c.dir / "profiles" / f"round-{n}"
    try:
        a["profile"] = profile_incumbent(c, n, a)
    except (OSError, RuntimeError, ValueError) as exc:  # advisory: never stops a round
        a["profile"] = {"error": f"{type(exc).__name__}: {exc}"}
    atomic_write_json(out / "analysis.json", a)
    atomic_write_text(out / "analysis.md", render_md(n, a) + "\n".join(profile_md(a["profile"])))
    return a
