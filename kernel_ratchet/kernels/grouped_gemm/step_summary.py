"""The lines under the grouped GEMM step table (:mod:`.step_bench`): pass count, the geomean
and minimum of each ratio against torch, per shape set, the FP8 step as the shipped dispatch
table would route it, host-bound steps and the lowest SNRs."""

from __future__ import annotations

import math
from typing import Any

from kernel_ratchet.kernels.bench_table import geomean
from kernel_ratchet.kernels.gemm.dispatch import load_table, measured_elsewhere
from kernel_ratchet.kernels.grouped_gemm import dispatch

#: A row of the table (:class:`.step_bench.StepRow`: ``shape``, ``ms``, ``snr``, ``host``, ``ok``)
StepRow = Any
#: The step with a prepared weight (:data:`.step_bench.PREPARED`).
PREPARED = "fp8_prep"
#: The paths whose SNRs the table checks, and the outputs of each.
KINDS = ("bf16", "fp8")
OUTS = ("out", "da", "db")

#: The ratios under the table: what, our path, the path it is divided into.
RATIOS = (
    ("bf16 fwd ours / torch", "fwd", "torch_fwd"),
    ("bf16 step ours / torch", "step", "torch_step"),
    ("FP8 step / torch bf16 step", "fp8_step", "torch_step"),
    ("FP8 step, weight prepared / torch bf16 step", PREPARED, "torch_step"),
)


def _ratios(rows: list[StepRow], ours: str, theirs: str) -> list[float]:
    got = (r.ratio(ours, theirs) for r in rows if ours in r.ms)
    return [v for v in got if math.isfinite(v)]


def summary(rows: list[StepRow], gmm: Any, sets: dict[str, list[str]] | None = None) -> list[str]:
    """Lines under the table: pass count, geomean and min of each ratio, the lowest SNRs;
    with ``sets`` (set name -> its labels) of more than one set, each set's geomean (min-max)
    of each ratio over its PASS rows."""
    ok = [r for r in rows if r.ok]
    lines = [f"PASS {len(ok)}/{len(rows)}; {gmm.describe()}"]
    ratios = [x for x in RATIOS if any(x[1] in r.ms for r in rows)]  # the paths timed
    for what, ours, theirs in ratios:
        got = _ratios(ok, ours, theirs)
        if got:
            lines.append(f"{what}: geomean {geomean(got):.2f}, min {min(got):.2f} ({len(got)})")
        else:
            lines.append(f"{what}: n/a")
    per_set = sets if sets and len(sets) > 1 else {}
    for name, labels in per_set.items():
        wanted = set(labels)
        mine = [r for r in ok if r.shape.label in wanted]
        cells = []
        for what, ours, theirs in ratios:
            got = _ratios(mine, ours, theirs)
            stat = f"{geomean(got):.2f} ({min(got):.2f}-{max(got):.2f})" if got else "n/a"
            cells.append(f"{what} {stat}")
        lines.append(f"{name} ({len(mine)}/{len(labels)} PASS): " + "; ".join(cells))
    lines += dispatched(ok) + host_bound(ok)
    for kind in KINDS:
        low = {k: min((r.snr[f"{kind}_{k}"] for r in ok), default=math.nan) for k in OUTS}
        lines.append(f"{kind} lowest SNR dB: " + ", ".join(f"{k} {v:.1f}" for k, v in low.items()))
    return lines


#: A step path whose host issue time reaches this share of its measured time is host-bound.
HOST_BOUND = 0.8


def host_bound(rows: list[StepRow]) -> list[str]:
    """A line naming the step paths that took at least :data:`HOST_BOUND` of their time to
    issue (their rates measure the launch cost as much as the kernels), or none."""
    hits = [
        f"{r.shape.label} {path} {ms:.2f}/{r.ms[path]:.2f} ms"
        for r in rows
        for path, ms in r.host.items()
        if math.isfinite(r.ms.get(path, math.nan)) and ms >= HOST_BOUND * r.ms[path]
    ]
    why = f"host-bound (issuing the step took >= {HOST_BOUND:.0%} of its time, host/step): "
    return [why + "; ".join(hits)] if hits else []


def dispatched(rows: list[StepRow]) -> list[str]:
    """The FP8 step as a caller gets it where the shipped dispatch table (:mod:`.dispatch`)
    sends some of the layers to the bf16 path: their bf16 step in place of their FP8 step,
    against torch's bf16 step; no line where it sends none."""
    lines = []
    for what, key, prepared in (
        ("FP8 step", "fp8_step", False),
        ("FP8 step, weight prepared", PREPARED, True),
    ):
        got, moved = [], 0
        for r in rows:
            if key not in r.ms:
                continue
            s = r.shape
            bf16 = dispatch.fp8_path(s.M, s.B, s.N, s.K, prepared) == "bf16"
            moved += bf16
            ratio = r.ms["torch_step"] / r.ms["step" if bf16 else key]
            got += [ratio] if math.isfinite(ratio) else []
        if moved and got:
            lines.append(
                f"{what} as dispatched ({moved} of {len(got)} layers on the bf16 path) / torch "
                f"bf16 step: geomean {geomean(got):.2f}, min {min(got):.2f}"
            )
    if lines:
        from kernel_ratchet.kernels.gemm.compare import versions

        table = load_table(dispatch.TABLE_PATH)
        note = measured_elsewhere(table, versions(), dispatch.FILL)
        lines += [note] if note else []
    return lines
