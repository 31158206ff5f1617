"""The inputs of a correctness check must be random data, not constants.

Constant or low-entropy inputs (zeros, ones, a repeated row) make every kernel read faster on a
GPU (less switching power, higher clocks) and hide data-dependent bugs, so a case whose
floating-point inputs are mostly low-entropy is refused. A small constant tensor next to large
random ones (a norm's weight of ones, a zero bias) is normal and allowed: the rule weighs
tensors by size.
"""

from __future__ import annotations

import torch

#: A float tensor is low-entropy with fewer distinct values than this (or all rows equal).
MIN_DISTINCT = 8
#: Elements sampled per tensor to count distinct values.
SAMPLE = 4096
#: The case is refused when low-entropy tensors hold more than this share of its float elements.
MAX_LOW_SHARE = 0.5


def low_entropy(t: torch.Tensor) -> bool:
    """True when ``t`` (floating point, at least ``MIN_DISTINCT`` elements) has fewer than
    ``MIN_DISTINCT`` distinct values in a strided sample, or identical rows; never for a
    tensor that repeats its values by a stride of 0 (``layout=broadcast``: the declared layout
    of a sum's incoming gradient, its values as random as they are many)."""
    flat = t.detach().reshape(-1)
    if flat.numel() < MIN_DISTINCT or _expanded(t):
        return False
    step = max(flat.numel() // SAMPLE, 1)
    sample = flat[::step][:SAMPLE].float()
    if int(torch.unique(sample).numel()) < MIN_DISTINCT:
        return True
    if t.dim() >= 2 and t.shape[0] > 1:
        rows = t.detach().reshape(t.shape[0], -1)
        return bool((rows == rows[:1]).all())
    return False


def low_entropy_inputs(named: list[tuple[str, torch.Tensor]]) -> list[str] | None:
    """Paths of the low-entropy float inputs when they hold more than ``MAX_LOW_SHARE`` of the
    case's float elements, else None (the case is random enough)."""
    floats = [(p, t) for p, t in named if t.is_floating_point() and t.numel() > 0]
    total = sum(t.numel() for _, t in floats)
    low = [(p, t) for p, t in floats if low_entropy(t)]
    if not total or sum(t.numel() for _, t in low) <= MAX_LOW_SHARE * total:
        return None
    return [p for p, _ in low]


def describe(paths: list[str]) -> str:
    """The refusal sentence for :func:`low_entropy_inputs`' result."""
    return (
        f"the inputs are not random: {', '.join(paths)} hold constant or low-entropy data "
        "(make_case must draw random inputs; constant data raises GPU clocks and hides "
        "data-dependent bugs)"
    )


def _expanded(t: torch.Tensor) -> bool:
    return any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape, strict=True))
