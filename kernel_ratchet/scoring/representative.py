"""Choice of representative_shapes at BASELINE (SPEC section 5).

Contract of :func:`choose_representative`: only scored rows (Check=PASS with non-zero work,
:func:`~kernel_ratchet.scoring.metrics.is_scored`) are candidates. With fewer than
``k_min`` PASS rows all of them are returned; with none, CampaignError, unless
``from_failing`` is set: then every row with work is a candidate (a BASELINE whose kernel is
wrong on every shape, declared so: the harness timed its rows all the same, and the fix round
that follows is measured on all target shapes). Otherwise exactly ``min(k_max, n_pass)``
labels are returned, in table order, chosen as:

1. the smallest-work shape (launch-bound) and the largest-work shape (compute/memory-bound);
   work = ``B·M·N·max(K, 1)``, ties broken by forward time, then table order;
2. for grouped ops (``grouped=True``), a skewed-distribution shape and a uniform one when the
   picks so far lack them (the noisiest of each kind);
3. the remaining slots: the PASS rows not yet chosen are sorted by work and cut into as many
   contiguous scale bands as there are free slots; from each band the shape with the highest
   relative variance (primary stddev / primary value) is taken. So the extra picks prefer noisy
   shapes while staying spread over the scale.

Distribution convention for grouped ops: a label is split into tokens at any character that is
not a letter or digit (``moe_e8_top2``, ``g8-skewed``, ``dist=zipf``, ``zipf1.2`` ...), a
token with a number attached also counting by its letters (``zipf1``). A token ``uniform``
marks a uniform distribution; any token in :data:`SKEWED_TOKENS` marks a skewed one. A grouped
op without a passing shape of either kind is a CampaignError: a gain seen only on uniform
tokens-per-expert is over-fitting (SPEC section 8), so the gap must be fixed in the shape set.
Ties everywhere break by table order, so the choice is deterministic.
"""

from __future__ import annotations

import math
import re

from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.harness.csv_schema import BenchTable, Row
from kernel_ratchet.scoring.metrics import is_scored, primary_value, work

UNIFORM_TOKEN = "uniform"
#: Label tokens that name a non-uniform tokens-per-expert distribution.
SKEWED_TOKENS: frozenset[str] = frozenset(
    {
        "skewed",
        "skew",
        "zipf",
        "powerlaw",
        "imbalanced",
        "top1",
        "top2",
        "topk",
        "degenerate",
        "hot",
        "onehot",
        "heavy",
        "empty",
    }
)


def label_tokens(label: str) -> set[str]:
    """Lower-case alphanumeric tokens of a shape label, and each token's letters alone where
    a number is attached (``zipf1.2`` reads as ``zipf1``, ``2`` and ``zipf``; ``top2`` as
    ``top2`` and ``top``)."""
    tokens = {t for t in re.split(r"[^a-z0-9]+", label.lower()) if t}
    return tokens | {w for t in tokens for w in re.findall(r"[a-z]+", t)}


def is_uniform(label: str) -> bool:
    return UNIFORM_TOKEN in label_tokens(label)


def is_skewed(label: str) -> bool:
    return bool(label_tokens(label) & SKEWED_TOKENS)


def _scale_key(indexed: tuple[int, Row]) -> tuple[int, float, int]:
    i, row = indexed
    ms = row.fwd_ms if math.isfinite(row.fwd_ms) else math.inf
    return (work(row), ms, i)


def _rel_var(row: Row, campaign_type: str) -> float:
    try:
        value, std = primary_value(row, campaign_type)
    except SchemaError:
        if row.passed:
            raise
        return 0.0  # a failing row (a candidate only when none passes) may have no timing
    return std / value


def _noisiest(cands: list[tuple[int, Row]], campaign_type: str) -> tuple[int, Row]:
    return max(cands, key=lambda c: (_rel_var(c[1], campaign_type), -c[0]))


def _distribution_picks(
    passed: list[tuple[int, Row]], chosen: list[tuple[int, Row]], campaign_type: str
) -> list[tuple[int, Row]]:
    extra: list[tuple[int, Row]] = []
    for kind, test in (("skewed", is_skewed), ("uniform", is_uniform)):
        if any(test(r.label) for _, r in chosen + extra):
            continue
        taken = {i for i, _ in chosen + extra}
        cands = [c for c in passed if test(c[1].label) and c[0] not in taken]
        if not cands:
            raise CampaignError(
                f"grouped op: no passing shape with a {kind} token distribution in its label "
                f"(uniform: 'uniform'; skewed: {', '.join(sorted(SKEWED_TOKENS))}); "
                f"add a {kind} shape to the target shapes (docs/transfer.md)"
            )
        extra.append(_noisiest(cands, campaign_type))
    return extra


def _bands(rows: list[tuple[int, Row]], n: int) -> list[list[tuple[int, Row]]]:
    """Cut ``rows`` (sorted by scale) into ``n`` contiguous, near-equal, non-empty bands."""
    size, rem = divmod(len(rows), n)
    out, start = [], 0
    for b in range(n):
        end = start + size + (1 if b < rem else 0)
        out.append(rows[start:end])
        start = end
    return out


def choose_representative(
    table: BenchTable,
    campaign_type: str,
    *,
    k_min: int = 3,
    k_max: int = 5,
    grouped: bool = False,
    from_failing: bool = False,
) -> list[str]:
    """Pick representative shape labels from a BASELINE table (see the module docstring).

    Raises ValueError for ``not 1 <= k_min <= k_max`` and CampaignError when no row passes
    (unless ``from_failing``: then from every row with work) or a grouped op lacks a candidate
    skewed or uniform shape.
    """
    if not 1 <= k_min <= k_max:
        raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
    passed = [(i, r) for i, r in enumerate(table.rows) if is_scored(r)]
    if not passed and from_failing:
        passed = [(i, r) for i, r in enumerate(table.rows) if work(r) > 0]
    if not passed:
        raise CampaignError(
            "the baseline has no passing shape (every row is Check=FAIL); fix correctness "
            "before choosing representative shapes"
        )
    if len(passed) < k_min:
        return [r.label for _, r in passed]
    by_scale = sorted(passed, key=_scale_key)
    chosen = [by_scale[0]] if len(by_scale) == 1 else [by_scale[0], by_scale[-1]]
    if grouped:
        chosen += _distribution_picks(passed, chosen, campaign_type)
    k = min(k_max, len(passed))
    if len(chosen) > k:
        raise CampaignError(
            f"{len(chosen)} shapes are required (scale ends and distributions) but k_max={k_max}"
        )
    taken = {i for i, _ in chosen}
    rest = [c for c in by_scale if c[0] not in taken]
    if k > len(chosen):
        for band in _bands(rest, k - len(chosen)):
            chosen.append(_noisiest(band, campaign_type))
    return [r.label for _, r in sorted(chosen, key=lambda c: c[0])]
