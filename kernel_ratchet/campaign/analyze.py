"""ANALYZE: a roofline per shape from ceilings measured on this machine.

Ceilings (matrix peak per dtype with ``torch.matmul`` / ``torch._scaled_mm``, copy bandwidth
with a large device copy) are measured once per campaign (one GPU) and cached as
``<campaign>/profiles/ceilings.json``; on a machine without a GPU they are measured on the
CPU and labelled so (a rehearsal: the numbers say nothing about a GPU). The incumbent's latest
CSV is then read against them (:mod:`kernel_ratchet.scoring.roofline`: bound and fraction of
the roofline per PASS shape) and written to ``profiles/round-N/analysis.json`` and
``analysis.md``, followed by the incumbent's kernel time breakdown (torch.profiler, and Nsight
Compute metrics where ncu works) on the least efficient representative shape
(:mod:`kernel_ratchet.campaign.profiling`).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text
from kernel_ratchet.campaign.profiling import pick_shape, profile_incumbent
from kernel_ratchet.campaign.profiling import render_md as profile_md
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.scoring.roofline import Ceilings, analyze_table, render_md

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


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
    label = "GPU" if gpu else "CPU (the Triton interpreter: its times say nothing of a GPU's)"
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


def _adapter(c: CampaignContext) -> Any:
    from kernel_ratchet.harness.adapter import load_adapter

    sys.path.insert(0, str(c.root))
    try:
        return load_adapter(c.m.adapter)
    except Exception:  # noqa: BLE001 - analysis is advisory; no adapter, no bytes
        return None
    finally:
        sys.path.remove(str(c.root))


#: Why a round's analysis holds no profile when its optimizer does not read one.
NOT_READ = (
    "not taken: this campaign's optimizer does not read it (a profiler run and Nsight Compute "
    "per new incumbent); rounds proposed by an agent or by hand take it"
)


#: Why an analysis asked for without a profiler run holds no profile.
NOT_ASKED = "not taken: `ratchet analyze --no-profile-run`"


def _not_read(c: CampaignContext, a: dict[str, Any], out: Path, why: str) -> dict[str, Any]:
    """The profile an earlier analysis of this folder took of the same incumbent and shape
    (kept: a run without the profiler does not erase it), or why there is none."""
    key = {"incumbent_round": c.state.incumbent_round, "shape": pick_shape(c, a)["label"]}
    try:
        kept = json.loads((out / "analysis.json").read_text()).get("profile") or {}
    except (OSError, ValueError, AttributeError):
        kept = {}
    if kept.get("key") == key and "error" not in kept:
        return kept
    return {"key": key, "error": why}


def analyze_campaign(
    c: CampaignContext, n: int, profile: bool = True, why_not: str = NOT_READ
) -> dict[str, Any]:
    """ANALYZE before round ``n``: the incumbent's latest CSV against the ceilings, and its
    profile unless ``profile`` is False (``why_not`` says why: an optimizer that does not
    read it, or the user's choice; a profile taken earlier for the same incumbent is kept);
    writes ``profiles/round-<n>/analysis.{json,md}`` and returns the analysis."""
    rel = c.state.incumbent_quick_csv or c.state.incumbent_full_csv
    if not rel:
        raise CampaignError(
            "ANALYZE reads the incumbent's measurements: run `ratchet baseline` first"
        )
    ceil = ceilings(c.dir)
    table = c.table(rel)
    a = analyze_table(
        table, ceil, adapter=_adapter(c), op=c.m.target_op, memory=c.m.campaign_type == "memory"
    )
    a["source_csv"] = rel
    out = c.dir / "profiles" / f"round-{n}"
    try:
        a["profile"] = profile_incumbent(c, n, a) if profile else _not_read(c, a, out, why_not)
    except (OSError, RuntimeError, ValueError) as exc:  # advisory: never stops a round
        a["profile"] = {"error": f"{type(exc).__name__}: {exc}"}
    atomic_write_json(out / "analysis.json", a)
    atomic_write_text(out / "analysis.md", render_md(n, a) + "\n".join(profile_md(a["profile"])))
    return a
