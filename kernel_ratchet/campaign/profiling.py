"""ANALYZE's profile of the incumbent: the kernel time breakdown from torch.profiler
and, where Nsight Compute works, a few hardware metrics per kernel.

Profiled: one shape, the representative shape the roofline analysis finds least efficient
(where the next gain is likeliest), in its own process in the project tree
(:mod:`kernel_ratchet.harness.breakdown`). The incumbent only changes on an ACCEPT, so a
profile is taken once per incumbent and shape and reused by the rounds after it (the reuse is
named). Everything here is advisory: a failure is recorded in the analysis and never stops a
round.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.steps import run_step

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

TIMEOUT_S = 300.0
NCU_LAUNCHES = 16  # at most this many kernel launches are replayed (one phase call each)
NCU_TIMEOUT_S = 120.0  # ncu replays each kernel once per metric pass; a hang must not stall ANALYZE
#: Nsight Compute metrics per kernel: time, SM and DRAM throughput (% of peak), registers,
#: achieved occupancy. ``--clock-control none``: the device's clocks are left alone.
NCU_METRICS = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)
#: What bounds a kernel that neither throughput reaches: the L2's throughput (% of peak), the
#: cycles between two issued instructions of a warp, and the part of them spent stalled for
#: each of the reasons that dominate tensor-core kernels (a warpgroup barrier, a global load,
#: a fixed-latency wait, a busy math pipe). Asked for in the same pass; a Nsight Compute that
#: does not know one of them is asked again for :data:`NCU_METRICS` alone.
NCU_L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
NCU_ISSUE = "smsp__average_warps_active_per_issue_active.ratio"
NCU_STALLS = ("barrier", "long_scoreboard", "wait", "math_pipe_throttle")
_STALL_METRICS = tuple(
    f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in NCU_STALLS
)
NCU_DETAIL = (NCU_L2, NCU_ISSUE, *_STALL_METRICS)


def pick_shape(c: CampaignContext, analysis: dict[str, Any]) -> dict[str, Any]:
    """The representative shape with the lowest roofline efficiency (else the first)."""
    reps = c.m.representative_shape_dicts or c.m.target_shapes[:1]
    eff = {s["label"]: s.get("efficiency") for s in analysis.get("shapes", [])}
    ranked = [s for s in reps if isinstance(eff.get(s["label"]), float)]
    return min(ranked, key=lambda s: eff[s["label"]]) if ranked else reps[0]


def _cached(c: CampaignContext, key: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """An earlier round's measured profile of ``key`` (from its ``analysis.json``)."""
    for path in sorted((c.dir / "profiles").glob("round-*/analysis.json")):
        try:
            prof = json.loads(path.read_text()).get("profile") or {}
        except (OSError, ValueError):
            continue
        if prof.get("key") == key and "phases" in prof and "reused_from" not in prof:
            return path.parent.name, prof
    return None


def profile_incumbent(c: CampaignContext, n: int, analysis: dict[str, Any]) -> dict[str, Any]:
    """The incumbent's profile before round ``n`` (its process's log in
    ``profiles/round-<n>/``; the profile itself goes into that round's ``analysis.json``)."""
    import torch

    shape = pick_shape(c, analysis)
    cuda = torch.cuda.is_available()
    key = {"incumbent_round": c.state.incumbent_round, "shape": shape["label"]}
    out = c.dir / "profiles" / f"round-{n}"
    hit = _cached(c, key)
    if hit:
        return {**hit[1], "reused_from": hit[0]}
    cmd = [
        sys.executable,
        "-m",
        "kernel_ratchet.harness.breakdown",
        "--root",
        str(c.root),
        "--adapter",
        c.m.adapter,
        "--shape",
        json.dumps(shape),
        "--device",
        "cuda" if cuda else "cpu",
    ]
    raw = out / "breakdown_raw.json"
    env = {} if cuda else {"TRITON_INTERPRET": "1"}
    step = run_step(
        "profile",
        shlex.join([*cmd, "--iters", "3" if cuda else "1", "--out", str(raw)]),
        cwd=c.root,
        log_path=out / "breakdown.log",
        timeout_s=TIMEOUT_S,
        env=env,
    )
    if not step.ok or not raw.exists():
        prof = {"key": key, "error": f"the profile failed: {step.reason}"}
    else:
        prof = {"key": key, **json.loads(raw.read_text()), "seconds": round(step.seconds, 1)}
        raw.unlink()
        if cuda:
            prof["ncu"] = ncu_metrics(cmd, c.root, out)
    return prof


def ncu_metrics(cmd: list[str], root: Path, out: Path) -> dict[str, Any]:
    """Nsight Compute over one call of each phase (the target brackets them with
    cudaProfilerStart/Stop), or why there is none: :data:`NCU_METRICS` and
    :data:`NCU_DETAIL` in one pass, else :data:`NCU_METRICS` alone (the detail's failure said)."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"error": "ncu is not on the PATH"}
    detail = _ncu_pass(ncu, cmd, root, out / "ncu.log", (*NCU_METRICS, *NCU_DETAIL))
    if "kernels" in detail:
        return detail
    plain = _ncu_pass(ncu, cmd, root, out / "ncu_plain.log", NCU_METRICS)
    return {**plain, "detail_error": detail["error"]} if "kernels" in plain else detail


def _ncu_pass(
    ncu: str, cmd: list[str], root: Path, log: Path, metrics: tuple[str, ...]
) -> dict[str, Any]:
    full = [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--launch-count",
        str(NCU_LAUNCHES),
        "--metrics",
        ",".join(metrics),
        *cmd,
        "--ncu-target",
    ]
    step = run_step("ncu", shlex.join(full), cwd=root, log_path=log, timeout_s=NCU_TIMEOUT_S)
    text = log.read_text(errors="replace") if log.exists() else ""
    kernels = parse_ncu_csv(text, metrics)
    if not step.ok or not kernels:
        tail = " ".join(text.strip().splitlines()[-3:])[-300:]
        return {"error": f"ncu gave no metrics ({step.reason}): {tail}"}
    return {
        "method": f"Nsight Compute, --clock-control none, one call per phase: {', '.join(metrics)}",
        "kernels": kernels,
    }


def parse_ncu_csv(
    text: str, metrics: tuple[str, ...] = (*NCU_METRICS, *NCU_DETAIL)
) -> list[dict[str, Any]]:
    """Kernels of an ``ncu --csv --page raw`` report: one row per launch (a units row follows
    the header), one column per metric. Per kernel name: launches, and the mean of each of
    ``metrics`` the report has."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    by: dict[str, dict[str, Any]] = {}
    for row in rows:
        name = row.get("Kernel Name") or ""
        if not name or not (row.get("ID") or "").strip().isdigit():
            continue  # the units row
        k = by.setdefault(name, {"name": name[:120], "launches": 0, "metrics": {}})
        k["launches"] += 1
        for m in metrics:
            try:
                v = float((row.get(m) or "").replace(",", ""))
            except ValueError:
                continue
            k["metrics"].setdefault(m, []).append(v)
    for k in by.values():
        k["metrics"] = {m: sum(v) / len(v) for m, v in k["metrics"].items()}
    return sorted(by.values(), key=lambda k: -k["metrics"].get(NCU_METRICS[0], 0.0))


def render_md(prof: dict[str, Any]) -> list[str]:
    """The profile's section of ``analysis.md``."""
    key = prof.get("key", {})
    lines = [
        "",
        f"## Kernel time breakdown ({key.get('shape', '?')}, incumbent round-"
        f"{key.get('incumbent_round', '?')})",
        "",
    ]
    if "error" in prof:
        return [*lines, f"Not measured: {prof['error']}", ""]
    reused = f" Reused from {prof['reused_from']}." if prof.get("reused_from") else ""
    lines += [f"Measured: {prof['method']}.{reused}", ""]
    for phase, t in prof["phases"].items():
        lines += [
            f"{phase}: {t['total_ms']:.4g} ms per call",
            "",
            "| Kernel | Calls | ms | Share |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{k['name']}` | {k['calls']:.3g} | {k['ms']:.4g} | {k['share']:.1%} |"
            for k in t["kernels"]
        ]
        lines.append("")
    ncu = prof.get("ncu")
    if ncu and "error" in ncu:
        lines += [f"Nsight Compute: none ({ncu['error']})", ""]
    elif ncu:
        lines += [
            f"Nsight Compute ({ncu['method']}):",
            "",
            "| Kernel | Launches | " + " | ".join(NCU_METRICS) + " |",
            "|---|---|" + "---|" * len(NCU_METRICS),
        ]
        for k in ncu["kernels"]:
            vals = " | ".join(f"{k['metrics'].get(m, float('nan')):.4g}" for m in NCU_METRICS)
            lines.append(f"| `{k['name']}` | {k['launches']} | {vals} |")
        lines += ["", *_stall_md(ncu)]
    return lines


def _stall_md(ncu: dict[str, Any]) -> list[str]:
    """Where each kernel's warps wait (:data:`NCU_DETAIL`), or why that is not known."""
    if "detail_error" in ncu:
        return [f"Stalls: not measured ({ncu['detail_error']})", ""]
    rows = [k for k in ncu["kernels"] if k["metrics"].get(NCU_ISSUE)]
    if not rows:
        return []
    lines = [
        "Where warps wait: each stall reason's share of the cycles between two issued "
        "instructions of a warp.",
        "",
        "| Kernel | L2 % of peak | cycles per issue | " + " | ".join(NCU_STALLS) + " |",
        "|---|---|---|" + "---|" * len(NCU_STALLS),
    ]
    for k in rows:
        m = k["metrics"]
        per = m[NCU_ISSUE]
        shares = (m.get(s, float("nan")) / per for s in _STALL_METRICS)
        cells = " | ".join(f"{x:.0%}" for x in shares)
        l2 = m.get(NCU_L2, float("nan"))
        lines.append(f"| `{k['name']}` | {l2:.4g} | {per:.3g} | {cells} |")
    return [*lines, ""]
