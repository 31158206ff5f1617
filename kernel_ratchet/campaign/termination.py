"""After each round: the stagnation review (SPEC rule 8) and the termination check (T1-T3,
SPEC rule 9), each written to ``logs/optimize.md`` once."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.record import read_record
from kernel_ratchet.campaign.state import Termination
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

ESCALATION = {
    1: "diagnose and retry the same bottleneck differently",
    2: "full re-profile (stagnation review: at least three fundamentally different directions)",
    3: "inspect the generated code (PTX/SASS/IR)",
}


def after_round(c: CampaignContext, n: int) -> list[str]:
    """Stagnation review and termination check; returns warnings for the driver."""
    warnings = []
    k = c.state.consecutive_rollbacks
    opt = c.log("logs/optimize.md")
    if k >= 2 and not opt.contains(f"### Stagnation review after round-{n}"):
        step = ESCALATION.get(k, "compare against the best reference kernel and change approach")
        text = (
            f"### Stagnation review after round-{n}\n{k} consecutive rollbacks. Required: "
            f"{step}. Re-analyze and list at least three fundamentally different "
            "directions before the next round.\n\n"
        )
        opt.append(text)
        warnings.append(text.strip())
    term = check_termination(c)
    if term and not c.state.termination:
        c.state.termination = term
        opt.append(f"## Termination check\n{term.code} at {term.at}: {term.reason}\n\n")
        warnings.append(f"termination {term.code}: {term.reason}; run `ratchet report`")
    return warnings


def check_termination(c: CampaignContext) -> Termination | None:
    """T1 (performance target), T2 (fraction of the hardware peak) or T3 (max_iterations)
    when one holds, else None."""
    st, m = c.state, c.m
    inc = st.closed_round(st.incumbent_round or 1)
    chain = inc.paired_chain if inc else None  # the paired estimate; else the harness CSVs'
    gain = (chain if chain is not None else (inc.vs_baseline if inc else None)) or 0.0
    estimate = _chain_origin(c) * (1.0 + gain)
    if m.performance_target and estimate >= m.performance_target:
        return Termination(
            "T1",
            now(),
            f"performance target {m.performance_target}"
            f" reached (estimated full-set aggregate {estimate:.2f})",
        )
    if (
        m.efficiency_target
        and m.hardware_peak
        and estimate / m.hardware_peak >= m.efficiency_target
    ):
        return Termination(
            "T2",
            now(),
            f"{estimate / m.hardware_peak:.1%} of the hardware peak {m.hardware_peak} reached",
        )
    done = sum(1 for r in st.closed if r.round > 1)
    if done >= m.max_iterations:
        return Termination("T3", now(), f"max_iterations {m.max_iterations} reached")
    return None


def _chain_origin(c: CampaignContext) -> float:
    """The aggregate the paired chain counts from: the BASELINE's, or, where it passed no
    shape, the full validation of the fix accepted after it on correctness alone (the first
    accepted round: no other may run before it); NaN before that fix."""
    base = aggregates(c.baseline_table(), c.m.campaign_type).primary_avg
    fix = next((e for e in c.state.closed if e.round > 1 and e.status is Status.ACCEPTED), None)
    if not math.isnan(base) or fix is None:
        return base
    csv = read_record(c.round_dir(fix.round) / "round.json").csv
    return aggregates(c.table(csv), c.m.campaign_type).primary_avg if csv else math.nan
