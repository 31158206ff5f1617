"""MoE shape sets for the grouped GEMMs, generated from model configs and seeded routing.

A shape is one expert projection of one MoE layer on one batch: ``B`` = number of groups
(experts), ``M`` = routed rows after capacity dropping (``sum(group_lens)``), ``N``/``K`` the
projection's output/input features. ``params`` holds what rebuilds ``group_lens`` exactly:
``dist`` and ``seed`` (plus ``rows``, the routed rows before dropping, or ``lens`` for explicit
odd cases). Labels name the model, projection and distribution.

Distributions (:func:`group_lens`):

* ``uniform``: every expert gets rows // G (the remainder to the first ones);
* ``top2_cf1.0``: rows/2 tokens each route to 2 distinct experts by Gumbel-top-2 over
  per-expert biases ~ N(0, 0.5); each expert keeps at most ``ceil(1.0 * rows / G)`` rows;
* ``top1_cf1.25``: rows tokens route top-1 the same way, capacity ``ceil(1.25 * rows / G)``;
* ``skewed``: one expert gets 55% of the rows, the rest are spread by a Dirichlet(0.3) draw
  (near-degenerate; with many experts some get none).

Stress distributions (:data:`STRESS_DISTRIBUTIONS`, not in the campaign targets):

* ``zipf1.2``: rows/k tokens route to k distinct experts, Gumbel-top-k over log-weights
  ``-1.2 * log(rank)`` (expert ranks shuffled by the seed): popularity ~ 1 / rank^1.2;
* ``onehot_heavy``: one expert gets every token (rows/k rows, the most top-k routing allows),
  the other rows are spread evenly over the other experts.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from kernel_ratchet.harness.adapter import Shape

DISTRIBUTIONS = ("uniform", "top2_cf1.0", "top1_cf1.25", "skewed")
STRESS_DISTRIBUTIONS = ("uniform", "zipf1.2", "onehot_heavy")


@dataclass(frozen=True)
class MoEConfig:
    """What the grouped GEMM shapes need from a model config (values from the model cards)."""

    name: str
    experts: int
    hidden: int
    moe_intermediate: int
    top_k: int


MODELS: dict[str, MoEConfig] = {
    "dsv3": MoEConfig("DeepSeek-V3", 256, 7168, 2048, 8),
    "qwen3_30b": MoEConfig("Qwen3-30B-A3B", 128, 2048, 768, 8),
    "qwen3_235b": MoEConfig("Qwen3-235B-A22B", 128, 4096, 1536, 8),
    "mixtral_8x7b": MoEConfig("Mixtral-8x7B", 8, 4096, 14336, 2),
}

#: Configurations outside MODELS (no tuning was done on them): checks of the general case.
#: DBRX (16 experts, hidden 6144, ffn 10752, top-4) as one rank of 4-way expert tensor
#: parallelism: each expert's intermediate dimension split 4 ways.
OFFLIST_MODELS: dict[str, MoEConfig] = {
    "olmoe_1b_7b": MoEConfig("OLMoE-1B-7B", 64, 2048, 1024, 8),
    "qwen15_moe_a27b": MoEConfig("Qwen1.5-MoE-A2.7B", 60, 2048, 1408, 4),
    "dbrx_tp4": MoEConfig("DBRX TP4 slice", 16, 6144, 10752 // 4, 4),
}


def _route(
    rng: np.random.Generator,
    tokens: int,
    G: int,
    k: int,
    capacity: int,
    bias: np.ndarray | None = None,
) -> list[int]:
    bias = rng.normal(0.0, 0.5, size=G) if bias is None else bias
    counts = np.zeros(G, dtype=np.int64)
    for lo in range(0, tokens, 8192):  # chunks keep the Gumbel matrix small
        n = min(8192, tokens - lo)
        logits = bias[None, :] + rng.gumbel(size=(n, G))
        top = (
            np.argpartition(-logits, k - 1, axis=1)[:, :k]
            if k < G
            else np.tile(np.arange(G), (n, 1))
        )
        counts += np.bincount(top.ravel(), minlength=G)
    return [int(min(c, capacity)) for c in counts]


def group_lens(dist: str, G: int, rows: int, seed: int, top_k: int = 1) -> list[int]:
    """Rows per group for ``dist`` (see module doc); deterministic in ``seed``. ``top_k``
    (experts per token) is read by the stress distributions only."""
    return list(_group_lens(dist, G, rows, seed, top_k))


@functools.lru_cache(maxsize=256)
def _group_lens(dist: str, G: int, rows: int, seed: int, top_k: int) -> tuple[int, ...]:
    return tuple(_draw(dist, G, rows, seed, top_k))


def _draw(dist: str, G: int, rows: int, seed: int, top_k: int = 1) -> list[int]:
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        base, rem = divmod(rows, G)
        return [base + (1 if g < rem else 0) for g in range(G)]
    if dist == "top2_cf1.0":
        k = min(2, G)
        return _route(rng, rows // k, G, k, math.ceil(1.0 * rows / G))
    if dist == "top1_cf1.25":
        return _route(rng, rows, G, 1, math.ceil(1.25 * rows / G))
    if dist == "skewed":
        hot = int(rng.integers(G))
        n_hot = math.ceil(0.55 * rows) if G > 1 else rows
        w = rng.dirichlet(np.full(max(G - 1, 1), 0.3))
        rest = rng.multinomial(rows - n_hot, w) if G > 1 else np.zeros(0, dtype=np.int64)
        lens = [int(v) for v in rest]
        lens.insert(hot, n_hot)
        return lens
    if dist in STRESS_DISTRIBUTIONS:
        return _draw_stress(rng, dist, G, rows, top_k)
    raise ValueError(
        f"unknown distribution {dist!r}; known: {DISTRIBUTIONS + STRESS_DISTRIBUTIONS[1:]}"
    )


def _draw_stress(rng: np.random.Generator, dist: str, G: int, rows: int, k: int) -> list[int]:
    """``zipf1.2`` and ``onehot_heavy`` for rows = tokens * k (k distinct experts a token)."""
    tokens = rows // k
    if dist == "zipf1.2":
        bias = -1.2 * np.log(rng.permutation(G) + 1.0)
        return _route(rng, tokens, G, k, tokens, bias)
    hot = int(rng.integers(G))
    base, rem = divmod(rows - tokens, max(G - 1, 1))
    lens = [base + (1 if i < rem else 0) for i in range(G - 1)] if G > 1 else []
    lens.insert(hot, tokens if G > 1 else rows)
    return lens


def lens_of(shape: Shape) -> list[int]:
    """Rebuild ``group_lens`` of a shape from its params."""
    p = shape.params
    if "lens" in p:
        return [int(v) for v in p["lens"]]
    k = int(p.get("top_k", 1))
    return group_lens(str(p["dist"]), shape.B, int(p["rows"]), int(p["seed"]), k)


def make_shape(
    label: str, G: int, N: int, K: int, dist: str, rows: int, seed: int, top_k: int = 1
) -> Shape:
    lens = group_lens(dist, G, rows, seed, top_k)
    params: dict[str, object] = {"dist": dist, "seed": seed, "rows": rows}
    if dist not in DISTRIBUTIONS:  # the campaign targets' identities stay as they were
        params["top_k"] = top_k
    return Shape(label, M=sum(lens), N=N, K=K, B=G, params=params)


def explicit_shape(label: str, lens: list[int], N: int, K: int, seed: int = 0) -> Shape:
    return Shape(
        label,
        M=sum(lens),
        N=N,
        K=K,
        B=len(lens),
        params={"dist": "explicit", "seed": seed, "lens": list(lens)},
    )


def moe_shapes(
    tokens: int = 8192,
    models: tuple[str, ...] = tuple(MODELS),
    dists: tuple[str, ...] = DISTRIBUTIONS,
    seed: int = 0,
) -> list[Shape]:
    """gate_up (N = 2*intermediate, K = hidden) and down (N = hidden, K = intermediate)
    projections of each model for ``tokens`` tokens (rows = tokens * top_k) and each
    distribution."""
    out = []
    for key in models:
        m = MODELS[key] if key in MODELS else OFFLIST_MODELS[key]
        rows = tokens * m.top_k
        projs = {
            "gate_up": (2 * m.moe_intermediate, m.hidden),
            "down": (m.hidden, m.moe_intermediate),
        }
        for proj, (N, K) in projs.items():
            for dist in dists:
                label = f"{key}_{proj}_{dist}"
                out.append(make_shape(label, m.experts, N, K, dist, rows, seed, m.top_k))
    return out


def moe_target() -> list[Shape]:
    """Default target_shapes of the grouped GEMM campaigns: 4 models x 2 projections x 4
    distributions at 8192 tokens."""
    return moe_shapes()


def moe_bench() -> list[Shape]:
    """The benchmark set (20 shapes): gate_up of every model on all distributions, plus down
    of DeepSeek-V3 and Mixtral on uniform and skewed."""
    shapes = [s for s in moe_shapes() if "_gate_up_" in s.label]
    shapes += [
        s
        for s in moe_shapes(models=("dsv3", "mixtral_8x7b"), dists=("uniform", "skewed"))
        if "_down_" in s.label
    ]
    return shapes


def moe_offlist() -> list[Shape]:
    """The configurations outside MODELS, both projections, under the stress distributions
    (18 shapes at 8192 tokens)."""
    return moe_shapes(models=tuple(OFFLIST_MODELS), dists=STRESS_DISTRIBUTIONS)


def moe_campaign() -> list[Shape]:
    """Seven shapes for a round that must see both routing regimes on the same layers: Qwen3-235B
    gate_up uniform and Zipf-1.2 (512 rows per expert on average), Mixtral down uniform and
    skewed (2048), Qwen3-30B-A3B down uniform and skewed (512 rows, a contraction of 768: the
    forward's epilogue weighs most there), and the off-list OLMoE gate_up under one-hot-heavy
    routing (8192 tokens).
    The twins let the skew gate judge a change that applies by group size on the layers it
    touches (:func:`kernel_ratchet.guard.skew.skew_robustness`). DeepSeek-V3 is left out: with
    its 7.5e9-element weight each worker of a round held 68 GB on an H200, and the focused test
    beside the two workers ran out of memory."""
    wanted = (
        "qwen3_235b_gate_up_uniform",
        "qwen3_235b_gate_up_zipf1.2",
        "mixtral_8x7b_down_uniform",
        "mixtral_8x7b_down_skewed",
        "qwen3_30b_down_uniform",
        "qwen3_30b_down_skewed",
        "olmoe_1b_7b_gate_up_onehot_heavy",
    )
    by_label = {s.label: s for s in moe_target() + moe_stress()}
    return [by_label[label] for label in wanted]


def moe_stress() -> list[Shape]:
    """Every model (MODELS and OFFLIST_MODELS), both projections, under the stress
    distributions (42 shapes at 8192 tokens)."""
    return moe_shapes(models=(*MODELS, *OFFLIST_MODELS), dists=STRESS_DISTRIBUTIONS)


def moe_test_gpu() -> list[Shape]:
    """Real model dimensions with 512 tokens (fast references), every distribution."""
    return moe_shapes(tokens=512)


def odd_shapes() -> list[Shape]:
    """Empty groups (first, middle, last, all but one), counts not multiples of any tile, K and
    N not multiples of 128."""
    return [
        explicit_shape("odd_empty_edges", [0, 37, 0, 129, 1, 0], N=96, K=160),
        explicit_shape("odd_one_group", [0, 0, 211, 0], N=72, K=136),
        explicit_shape("odd_all_small", [1, 2, 3, 5, 7, 11, 13], N=130, K=256),
        explicit_shape("odd_all_empty", [0, 0, 0], N=64, K=128),
    ]


def tiny_cpu() -> list[Shape]:
    """Interpreter-sized shapes: every distribution on 6 groups, plus the odd ones."""
    shapes = [make_shape(f"tiny_{d}", 6, 48, 128, d, 120, 1) for d in DISTRIBUTIONS]
    return shapes + odd_shapes()


def tiny_step() -> list[Shape]:
    """The step table's ``--dry-run`` set: uniform routing and an empty group, interpreter-sized
    (N a multiple of 8, as ``torch._grouped_mm`` needs 16-byte strides)."""
    return [
        make_shape("tiny_step_uniform", 4, 32, 128, "uniform", 64, 1),
        explicit_shape("tiny_step_empty_group", [8, 0, 16], N=16, K=128),
    ]
