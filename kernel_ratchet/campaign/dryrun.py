"""A quick validation without a round: the generated harness on the working tree, nothing decided.

A driver (an editor agent through MCP, a person) uses it to look at a candidate before stating
the round: it measures the representative shapes (or all target shapes) of whatever the kernel
files hold now and previews how the one decision function would judge it against the incumbent.
Nothing here touches the round chain, the logs, the state or the kernel files: the CSV and the
harness log go to ``<campaign_dir>/profiles/dryrun-<YYYYMMDD-HHMMSS>/``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.fsutil import file_sha256
from kernel_ratchet.campaign.lineage.kernel import code_changed_files, kernel_changed, kernel_texts
from kernel_ratchet.campaign.quick_bench import run_harness
from kernel_ratchet.campaign.record import LEVELS
from kernel_ratchet.campaign.rounds.reach import HEADLINE, unreached_in
from kernel_ratchet.campaign.state import Phase
from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.decision import decide

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def quick_validation(c: CampaignContext, level: str = "quick") -> dict[str, Any]:
    """Run the campaign's harness on the current kernel files; return the parsed rows.

    ``level``: ``quick`` (representative shapes) or ``full`` (all target shapes). Returns
    ``{"ok", "reason", "level", "csv", "log", "schema", "rows", "all_pass", "preview",
    "unreached"}`` where ``rows`` are the CSV records, ``preview`` is what the decision would
    say against the incumbent (None when the harness failed) and ``unreached`` the changed
    kernel lines no launch of the measured shapes reached (as a round records them; absent
    when the harness failed). A crashing or failing harness is an outcome
    (``ok`` False), not an exception. Raises CampaignError before the baseline (no
    representative shapes yet), for an unknown level, or when the generated harness was edited;
    SchemaError when the CSV drifted from the frozen schema.
    """
    if c.state.phase is Phase.INITIALIZED:
        raise CampaignError(
            "no baseline yet: run `ratchet baseline` first (it picks the "
            "representative shapes a quick validation measures)"
        )
    if level not in LEVELS:
        raise CampaignError(f"level must be quick or full, not {level!r}")
    if file_sha256(c.dir / "quick_test_bench.py") != c.state.harness_sha256:
        raise CampaignError(
            "quick_test_bench.py was edited outside the tool; run `ratchet "
            "status` or `ratchet validate` to regenerate it first"
        )
    out = c.dir / "profiles" / time.strftime("dryrun-%Y%m%d-%H%M%S")
    n = 2
    while out.exists():
        out = out.with_name(f"{out.name.split('~')[0]}~{n}")
        n += 1
    csv = out / "benchmark.csv"
    c.say(f"dry run: harness, {level} level, on the working tree (no round)")
    h = run_harness(c, level, csv, out / "harness.log")
    result: dict[str, Any] = {
        "ok": False,
        "reason": h.reason,
        "level": level,
        "csv": c.rel(csv),
        "log": c.rel(out / "harness.log"),
        "schema": c.m.csv_schema.get("name"),
        "rows": [],
        "all_pass": False,
        "preview": None,
    }
    if not h.ok or not csv.exists():
        result["reason"] = f"the harness failed: {h.reason}"
        return result
    table = c.table(c.rel(csv))
    result.update(ok=True, rows=table.to_records(), all_pass=all(r.passed for r in table.rows))
    result["preview"] = _preview(c, table, level)
    result["unreached"] = unreached_in(out, kernel_texts(c))
    if result["unreached"]:
        c.say(f"dry run: {HEADLINE}: " + "; ".join(result["unreached"]))
    return result


def _preview(c: CampaignContext, cand: BenchTable, level: str) -> dict[str, Any] | None:
    """The decision against the incumbent's CSV at the same level (not recorded anywhere)."""
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    if not inc_rel:
        return None
    try:
        by = c.table(inc_rel).by_label()
    except SchemaError:
        return None
    inc = BenchTable(cand.schema, tuple(by[r.label] for r in cand.rows if r.label in by))
    d = decide(inc, cand, c.m.campaign_type, regression_threshold=c.m.regression_threshold)
    if not kernel_changed(c):
        would_be = "no round: the kernel files equal the incumbent's"
    elif not code_changed_files(c):
        would_be = "no round: the kernel files differ from the incumbent's only in comments"
    else:
        would_be = d.status.value
    return {
        "would_be": would_be,
        "method": (
            f"unpaired: this run against round-{c.state.incumbent_round}'s CSV, timed apart; "
            "a diagnostic that noise alone can move by more than its noise band, not a "
            "decision (a round decides by a paired A/B)"
        ),
        "reason": d.reason,
        "gain": d.gain,
        "gain_noise": d.gain_noise,
        "incumbent_round": c.state.incumbent_round,
        "incumbent_csv": inc_rel,
    }
