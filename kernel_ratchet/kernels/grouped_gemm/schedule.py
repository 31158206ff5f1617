"""How well a grouped GEMM launch keeps the SMs busy, from the group sizes (host-side model).

The kernels read ``group_lens`` on the device only; a census knows them on the host and can say
what each launch's schedule does with them:

* **fill**: useful work / (SMs x the time the busiest SM works), 1.0 = every SM busy until the
  end. The persistent forward/dgrad kernel hands tile ``i`` to program ``i % P`` (equal work
  per tile); the weight-gradient kernels launch one CTA per (group, n tile, k tile), each
  looping over its group's rows, dispatched in launch order to the SM that frees first. A
  skewed routing makes the CTAs of the hot expert long: when they start late, the other SMs
  idle while they finish.
* **waste**: MMA rows issued / routed rows (partial last tiles of every group; for the FP8
  weight gradient, the 128-token chunks are aligned to the global scale blocks, so a group
  spans up to two partial chunks).

Work units: one MMA k-step of a tile; a CTA's epilogue counts as one step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fill:
    """Schedule quality of one launch."""

    ctas: int
    fill: float
    waste: float


def mm_fill(lens: Sequence[int], N: int, BM: int, BN: int, programs: int) -> Fill:
    """Persistent forward/dgrad: tiles of BM rows x BN columns over every group."""
    row_tiles = sum(-(-n // BM) for n in lens)
    total = row_tiles * -(-N // BN)
    rows = sum(lens)
    fill = total / (programs * -(-total // programs)) if total else 1.0
    return Fill(programs, fill, row_tiles * BM / rows if rows else 1.0)


def wgrad_steps(lens: Sequence[int], step: int, aligned: bool) -> list[int]:
    """Row steps per group of a weight-gradient CTA: ``ceil(len / step)`` from the group's
    first row, or (``aligned``) the ``step``-row blocks of the whole token axis it touches."""
    if not aligned:
        return [-(-n // step) for n in lens]
    out, start = [], 0
    for n in lens:
        end = start + n
        out.append((end - 1) // step - start // step + 1 if n else 0)
        start = end
    return out


def list_schedule(work: Sequence[int], counts: Sequence[int], sms: int) -> float:
    """Makespan of ``counts[i]`` CTAs of ``work[i]`` units each, dispatched in order, one at a
    time per SM, each to the SM that frees first (CTAs of one batch go to the ``sms``
    earliest-free SMs together)."""
    free = np.zeros(sms)
    for w, n in zip(work, counts, strict=True):
        while n > 0:
            m = min(n, sms)
            free.sort()
            free[:m] += w
            n -= m
    return float(free.max())


def wgrad_fill(
    lens: Sequence[int],
    N: int,
    K: int,
    BN: int,
    BK: int,
    step: int,
    *,
    aligned: bool,
    sms: int,
    order: Sequence[int] | None = None,
    round_robin: bool = False,
) -> Fill:
    """One CTA per (group, n tile, k tile), groups launched in ``order`` (default: by index);
    with ``round_robin`` instead ``sms`` persistent programs, program ``p`` taking the tiles
    ``p, p + sms, ...`` of that list (the warp-specialized kernel's schedule)."""
    tiles = -(-N // BN) * -(-K // BK)
    steps = wgrad_steps(lens, step, aligned)
    order = list(range(len(lens))) if order is None else list(order)
    work = [steps[g] + 1 for g in order]
    total = sum(work) * tiles
    if round_robin:
        makespan = _round_robin(work, tiles, sms)
    else:
        makespan = list_schedule(work, [tiles] * len(order), sms)
    rows = sum(lens)
    waste = sum(steps) * step / rows if rows else 1.0
    return Fill(tiles * len(lens), total / (sms * makespan) if makespan else 1.0, waste)


def longest_first(lens: Sequence[int]) -> list[int]:
    """Groups by decreasing row count, ties by index (the order a skew-aware launch uses)."""
    return sorted(range(len(lens)), key=lambda g: (-lens[g], g))


def _round_robin(work: Sequence[int], count: int, sms: int) -> float:
    """Makespan of ``count`` tiles of ``work[i]`` units for each ``i`` in order, tile ``t`` of
    that list on program ``t % sms``."""
    per_tile = np.repeat(np.asarray(work, dtype=np.float64), count)
    per_tile = np.concatenate([per_tile, np.zeros(-len(per_tile) % sms)])
    return float(per_tile.reshape(-1, sms).sum(axis=0).max()) if len(per_tile) else 0.0


def waves(ctas: int, sms: int) -> float:
    """CTAs per SM of a non-persistent launch (1.0 = one full wave)."""
    return ctas / sms if sms else math.inf
