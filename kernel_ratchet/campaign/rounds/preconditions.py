"""What ``validate`` checks before a round is opened: nothing is spent on a round that the
campaign cannot take (wrong phase, no hypothesis, unknown bucket or level, an edited log or
harness, kernel files equal to the incumbent's or differing only in comments and docstrings,
files changed outside kernel_source)."""

from __future__ import annotations

import os
import unicodedata
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import file_sha256
from kernel_ratchet.campaign.lineage.kernel import (
    code_changed_files,
    kernel_changed,
    out_of_scope,
    refuse_hidden_kernel,
    scope_reason,
)
from kernel_ratchet.campaign.quick_bench import write_harness
from kernel_ratchet.campaign.record import LEVELS
from kernel_ratchet.campaign.scope import split_ignored
from kernel_ratchet.campaign.seal import verify_records
from kernel_ratchet.errors import CampaignError, RatchetError, UsageError
from kernel_ratchet.guard.static_audit import BUCKETS

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def preconditions(
    c: CampaignContext,
    hypothesis: str,
    bucket: str,
    level: str,
    *,
    lesson: str = "",
    scope: bool = False,
    fix: bool = False,
) -> None:
    """Raise CampaignError (LogTamperedError for an edited log) when the round cannot start;
    an edited harness is regenerated from the manifest first. A hypothesis or lesson with a
    control character is a RatchetError (exit 2). ``scope``: files changed outside
    kernel_source refuse the round too (a driver at the keyboard fixes its tree and runs again;
    an optimizer's round records them as a SCOPE rollback). ``fix``: a correctness fix round."""
    st = c.state
    if st.phase.value == "INITIALIZED":
        raise CampaignError("no baseline yet: run `ratchet baseline` first")
    if st.phase.value != "OPTIMIZING" or st.termination:
        why = st.termination.reason if st.termination else st.phase.value
        then = "run `ratchet report`, or " if st.phase.value == "OPTIMIZING" else ""
        raise CampaignError(
            f"the campaign has ended ({why}); {then}start a new campaign with `ratchet init`"
        )
    if not hypothesis.strip():
        raise UsageError("state the round's hypothesis: --hypothesis 'what and why'")
    one_line("hypothesis", hypothesis)
    one_line("lesson", lesson)
    if bucket not in BUCKETS:
        raise UsageError(f"bucket must be one of {', '.join(BUCKETS)} (docs/transfer.md)")
    if level not in LEVELS:
        raise UsageError(f"level must be quick or full, not {level!r}")
    refuse_unless_fix(c, fix)
    verify_records(c)  # an edited log or record stops the campaign before any work is spent
    if file_sha256(c.dir / "quick_test_bench.py") != st.harness_sha256:
        _restore_harness(c)
    refuse_hidden_kernel(c)
    outside = split_ignored(out_of_scope(c))[0]
    if not kernel_changed(c):
        elsewhere = f" (changed outside them: {', '.join(outside)})" if outside else ""
        where = f" in {os.path.relpath(c.root)}" if c.root != c.profile.root else ""
        raise CampaignError(
            f"the kernel files ({', '.join(c.m.kernel_source)}{where}) equal the incumbent's"
            f"{elsewhere}: edit them with this round's single change, then run validate"
        )
    if not code_changed_files(c):
        raise CampaignError(
            "the kernel files differ from the incumbent's only in comments, docstrings or "
            "layout: a round measures a change of code, and this one would measure noise. "
            "Make it part of a round that changes code, or undo it"
        )
    outside = outside if scope else []
    if outside:
        why = scope_reason(c, outside)
        c.log("logs/optimize.md").append(f"> {now()}: validate refused before a round: {why}\n\n")
        c.save()
        raise CampaignError(
            f"no round was opened, nothing was measured and your kernel edit is still in the "
            f"working tree: {why}"
        )


def refuse_unless_fix(c: CampaignContext, fix: bool) -> None:
    """Refuse (CampaignError) a round that is not a fix while the incumbent passes no shape:
    nothing can be timed against it (:mod:`.correctness_only`)."""
    if fix or not c.incumbent_passes_none():
        return
    raise CampaignError(
        f"the incumbent (round-{c.state.incumbent_round}) passes the harness's correctness "
        "check on no target shape (its BASELINE was taken with --known-failure), so no round "
        "can be timed against it; no round was opened and nothing was measured. Fix the "
        "kernel first: `ratchet validate --fix --hypothesis '...'` runs on every target shape "
        "and is accepted, on correctness alone, once the focused test and every shape pass; "
        "later rounds are paired against it"
    )


def round_level(c: CampaignContext, level: str, fix: bool) -> str:
    """The level a round asked for at ``level`` runs at: the full level for a fix against an
    incumbent that passes no shape (it must pass every target shape, and its CSV becomes the
    incumbent's full validation, which later full-level rounds are paired against)."""
    if not fix or level == "full" or not c.incumbent_passes_none():
        return level
    c.say(
        "the incumbent passes no shape: the fix runs at the full level (every target shape) "
        f"instead of {level}"
    )
    return "full"


def one_line(name: str, text: str) -> None:
    """Refuse ``text`` with a newline or other control character: it is written into the
    append-only logs, where a second line could forge a round's heading or verdict."""
    bad = sorted({f"U+{ord(ch):04X}" for ch in text if unicodedata.category(ch) == "Cc"})
    if bad:
        raise RatchetError(
            f"--{name} must be one line without control characters (found {', '.join(bad)}); "
            "it is written into the append-only logs"
        )


def _restore_harness(c: CampaignContext) -> None:
    sha = write_harness(
        c.dir, c.m, c.root, shapes=c.m.representative_shape_dicts, target_shapes=c.m.target_shapes
    )
    c.log("logs/optimize.md").append(
        f"> {now()}: quick_test_bench.py had been edited outside the tool; it was regenerated "
        "from manifest.yaml before any measurement.\n\n"
    )
    c.save()
    if sha != c.state.harness_sha256:
        raise CampaignError(
            "the regenerated harness does not match the campaign's record; "
            "manifest.yaml may have been edited: start a new campaign"
        )
    raise CampaignError(
        f"{c.dir / 'quick_test_bench.py'} was edited; the harness is generated and must not "
        "change during a campaign. It was regenerated from manifest.yaml: run validate again"
    )
