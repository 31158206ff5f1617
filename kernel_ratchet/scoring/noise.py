"""How noisy one paired round is, and which timing variant buys precision most cheaply.

From an A/A paired run (:class:`kernel_ratchet.harness.ab.PairedRun`, incumbent against itself):

* ``spread``: the robust standard deviation ``1.4826 · MAD`` of the per-round log speed ratios,
  each shape centred on its own median, pooled over shapes (≈ the relative noise of one paired
  round; ``per_shape`` has each shape's own);
* ``order_effect``: half the difference of the mean log ratio between rounds where the
  candidate was timed first and rounds where the incumbent was, i.e. the speed advantage of
  being timed first (0 when the order does not matter; pairing in a shuffled order removes its
  bias but not its variance);
* ``s_per_round``: wall seconds of one round (all shapes, both sides), checks excluded;
* ``cost = spread² · s_per_round``: the measuring time a variant needs for a given CI width
  (the width shrinks as ``spread / √rounds``), so lower is better.

:func:`choose` keeps the first (current) variant unless another costs less than ``margin``
times as much: a variant is not switched to on a difference within the estimate's own noise
(16 rounds of 3 shapes estimate a spread to about ±15%).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel_ratchet.scoring.calibration import MAD_TO_SD
from kernel_ratchet.scoring.paired import log_ratios

if TYPE_CHECKING:
    from kernel_ratchet.harness.ab import PairedRun

#: A variant replaces the current one only when it costs less than this fraction of it.
SWITCH_MARGIN = 0.7


@dataclass(frozen=True)
class RoundNoise:
    """The noise of one paired round under one timing variant (see the module docstring)."""

    name: str
    params: Mapping[str, Any]
    spread: float
    per_shape: Mapping[str, float]
    order_effect: float
    s_per_round: float
    rounds: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cost(self) -> float:
        return self.spread**2 * self.s_per_round

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params), "spread": self.spread,
                "per_shape": dict(self.per_shape), "order_effect": self.order_effect,
                "s_per_round": self.s_per_round, "rounds": self.rounds, "cost": self.cost,
                **dict(self.extra)}  # fmt: skip


def round_noise(name: str, params: Mapping[str, Any], run: PairedRun) -> RoundNoise:
    """Summarise an A/A run. Raises ValueError for a failed run or one with no rounds."""
    if run.failure is not None or run.rounds < 2:
        why = run.failure.sentence() if run.failure else f"{run.rounds} round(s)"
        raise ValueError(f"variant {name!r}: no noise estimate from this run ({why})")
    first = {(r, label): side for r, label, side in run.order}
    pooled: list[float] = []
    per_shape: dict[str, float] = {}
    by_first: dict[str, list[float]] = {"incumbent": [], "candidate": []}
    for label, s in run.samples().items():
        x = log_ratios(s, run.campaign_type)
        centred = x - np.median(x)
        per_shape[label] = MAD_TO_SD * float(np.median(np.abs(centred)))
        pooled.extend(centred)
        for r, v in enumerate(x):
            by_first[first.get((r, label), "incumbent")].append(float(v))
    spread = MAD_TO_SD * float(np.median(np.abs(pooled)))
    # log ratio = ln(t_incumbent / t_candidate): the side timed first reads faster by d when
    # the mean is -d with the incumbent first and +d with the candidate first
    order = (
        (float(np.mean(by_first["candidate"])) - float(np.mean(by_first["incumbent"]))) / 2.0
        if by_first["candidate"] and by_first["incumbent"]
        else 0.0
    )
    s_round = max(run.wall_s - run.check_wall_s, 0.0) / run.rounds
    return RoundNoise(name, dict(params), spread, per_shape, order, s_round, run.rounds)


def choose(reports: Sequence[RoundNoise], margin: float = SWITCH_MARGIN) -> tuple[RoundNoise, str]:
    """The variant to use and why: the first (current) one unless another's cost is below
    ``margin`` times its cost. Raises ValueError for no reports."""
    if not reports:
        raise ValueError("choose needs at least one variant")
    base = reports[0]
    best = min(reports, key=lambda r: r.cost)
    if best is base or best.cost >= margin * base.cost:
        return base, (
            f"kept {base.name!r}: no variant costs under {margin:g}x its {base.cost:.3g} (spread "
            f"{base.spread:.2%}, {base.s_per_round:.2f} s/round)"
        )
    return best, (
        f"{best.name!r} costs {best.cost / base.cost:.2f}x {base.name!r} (spread "
        f"{best.spread:.2%} vs {base.spread:.2%}, {best.s_per_round:.2f} vs "
        f"{base.s_per_round:.2f} s/round)"
    )
