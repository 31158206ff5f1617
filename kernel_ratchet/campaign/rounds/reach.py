"""Say which of a round's changed kernel lines no launch of its shapes reached.

The round's harness records each launch's scalar arguments beside its CSV
(:mod:`kernel_ratchet.harness.launches`); :func:`note_unreached` reads them with the changed
files (:mod:`kernel_ratchet.guard.reach`) and puts the lines none reached in the round's record
and its progress. It decides nothing: a change there was timed and checked on code it did not
touch, which the record says, so a reader (or the next round's driver) knows the verdict does
not speak for it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kernel_ratchet.guard.reach import unreached
from kernel_ratchet.harness import launches

if TYPE_CHECKING:
    from pathlib import Path

    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.record import RoundRecord

#: What the progress and the summary say before the lines.
HEADLINE = "changed kernel lines no launch of the measured shapes reached"


def launch_args(art: Path) -> dict[str, list[dict]] | None:
    """Per kernel, the argument sets the round's harness launched it with (its level's and,
    after an escalation, the full level's); None when neither recorded any."""
    return launches.read_args(art / launches.ARGS_FILE, art / "full" / launches.ARGS_FILE)


def unreached_in(art: Path, texts: tuple[dict, dict]) -> list[str]:
    """The changed JIT-function lines no launch the harness recorded in ``art`` reached
    (``texts``: the kernel files as the incumbent and the candidate have them); none where it
    recorded no launch (it did not run, or the op launches no Triton kernel)."""
    args = launch_args(art)
    return [u.text() for u in unreached(*texts, args)] if args else []


def note_unreached(
    c: CampaignContext, record: RoundRecord, art: Path, texts: tuple[dict, dict]
) -> RoundRecord:
    """``record`` with :func:`unreached_in`'s lines, said in the progress; unchanged where
    there are none."""
    found = unreached_in(art, texts)
    if not found:
        return record
    c.say(f"round-{record.round}: {HEADLINE}: " + "; ".join(found))
    return replace(record, unreached=tuple(found))
