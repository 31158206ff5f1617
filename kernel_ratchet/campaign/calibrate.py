"""``ratchet calibrate``: A/A runs (the incumbent against itself) on the campaign's
representative shapes measure this machine's false-accept rate and smallest detectable
effect; stored in ``<campaign>/calibration.json``, after which a round's gain smaller than that
effect is never claimed (``rounds.paired.min_detectable``).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_json
from kernel_ratchet.campaign.rounds.paired import CALIBRATION, run_ab
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.scoring.calibration import Calibration, calibrate

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign


def calibrate_campaign(c: Campaign, trials: int = 20) -> Calibration:
    """Run ``trials`` A/A measurements and store the calibration. Raises CampaignError before
    the baseline, with kernel files that differ from the incumbent, for trials < 2, or while
    the incumbent passes no shape."""
    c.recover()
    if c.state.phase.value != "OPTIMIZING":
        raise CampaignError("calibration needs a baselined, running campaign")
    if trials < 2:
        raise CampaignError("calibration needs at least 2 A/A trials (20 recommended)")
    if c.ctx.incumbent_passes_none():
        raise CampaignError(
            "the incumbent passes the correctness check on no shape, so it cannot be timed "
            "against itself: calibrate once a `ratchet validate --fix` round is accepted"
        )
    labels = list(c.m.representative_shapes)
    base = c.dir / "profiles" / f"calibration-{now().replace(' ', '_').replace(':', '')}"
    secret = secrets.randbits(63)

    def run_aa(i: int):
        c.say(f"calibration: A/A trial {i + 1}/{trials}")
        return run_ab(c.ctx, labels, base / f"trial-{i}", secret=secret + i, rng_seed=i, a_a=True)

    cal = calibrate(run_aa, trials)
    atomic_write_json(c.dir / CALIBRATION, {**cal.to_dict(), "written": now(), "shapes": labels})
    c.log("logs/optimize.md").append(
        f"## Calibration ({now()})\n{trials} A/A trials on {', '.join(labels)}: false-accept "
        f"rate {cal.false_accept_rate:.1%}, false-regression rate "
        f"{cal.false_regression_rate:.1%}, minimum detectable effect "
        f"{cal.min_detectable_effect:.2%} (no smaller gain is claimed from now on).\n\n"
    )
    c.save()
    return cal
