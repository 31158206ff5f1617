"""A round's harness at one level, as every judged level runs it: the harness (the one started
beside the focused test where it is this one), its time and command in the draft, its
provenance; a harness that fails or writes no CSV ends the round as a HARNESS failure."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.quick_bench import (
    EarlyHarness,
    harness_record,
    run_harness,
    write_provenance,
)
from kernel_ratchet.campaign.record import RoundDraft, RoundRecord

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def level_harness(
    c: CampaignContext,
    draft: RoundDraft,
    art: Path,
    level: str,
    name: str = "benchmark.csv",
    early: EarlyHarness | None = None,
) -> tuple[Path, RoundRecord | None]:
    """The harness at ``level`` writing ``art/name`` (its log beside it): (its CSV, None), or
    (its CSV path, the record of the round it ended) where it failed. ``early``: the round's
    harness started beside its focused test, used when it is this one."""
    h, csv = _run_harness(c, art, level, name, early)
    draft.timed(f"harness_{level}", h.seconds)
    draft.harness_command = draft.harness_command or harness_record(c, level, csv)
    if not h.ok or not csv.exists():
        why = f"the {level}-level harness failed: {h.reason}"
        return csv, draft.failed(Category.HARNESS, why, now())
    write_provenance(c, art, level)
    return csv, None


def _run_harness(
    c: CampaignContext, art: Path, level: str, name: str, early: EarlyHarness | None = None
):
    """(step, CSV path) of the harness at ``level`` writing ``art/name``, its log beside it."""
    csv = art / name
    h = early.run(level, csv) if early is not None else None
    return h or run_harness(c, level, csv, art / name.replace(".csv", ".log")), csv
