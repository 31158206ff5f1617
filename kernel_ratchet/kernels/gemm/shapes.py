"""Shape sets of the dense GEMM ops, generated from model configurations.

A Linear layer ``out = a @ bᵀ`` has ``a: [M, K]`` (tokens x in-features) and ``b: [N, K]``
(out-features x in-features). Per transformer layer the four dense GEMMs are:

=========  =================================  ==============
GEMM       N (out-features)                   K (in)
=========  =================================  ==============
qkv        (heads + 2 * kv_heads) * head_dim  hidden
attn_out   hidden                             heads*head_dim
gate_up    2 * intermediate                   hidden
down       hidden                             intermediate
=========  =================================  ==============

``M = micro_batch * SEQ_LEN`` tokens. Identical (M, N, K) triples from different models are
kept once, labelled by the first model that produced them (``llama2-7b.qkv.mb1``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel_ratchet.harness.adapter import Shape

SEQ_LEN = 4096
MICRO_BATCHES = (1, 2, 4)


@dataclass(frozen=True)
class ModelDims:
    """The dimensions of one model's decoder layer that determine its GEMM shapes."""

    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int = 128


#: Public model configurations (their config.json values).
MODELS: tuple[ModelDims, ...] = (
    ModelDims("llama2-7b", hidden=4096, intermediate=11008, heads=32, kv_heads=32),
    ModelDims("llama2-70b", hidden=8192, intermediate=28672, heads=64, kv_heads=8),
    ModelDims("llama3.1-8b", hidden=4096, intermediate=14336, heads=32, kv_heads=8),
    ModelDims("llama3.1-70b", hidden=8192, intermediate=28672, heads=64, kv_heads=8),
    ModelDims("qwen2.5-7b", hidden=3584, intermediate=18944, heads=28, kv_heads=4),
    ModelDims("qwen2.5-72b", hidden=8192, intermediate=29568, heads=64, kv_heads=8),
    ModelDims("mistral-7b", hidden=4096, intermediate=14336, heads=32, kv_heads=8),
)


def layer_gemms(m: ModelDims) -> list[tuple[str, int, int]]:
    """``(name, N, K)`` of the four dense GEMMs of one layer of ``m``."""
    q = m.heads * m.head_dim
    return [
        ("qkv", (m.heads + 2 * m.kv_heads) * m.head_dim, m.hidden),
        ("attn_out", m.hidden, q),
        ("gate_up", 2 * m.intermediate, m.hidden),
        ("down", m.hidden, m.intermediate),
    ]


def model_shapes(
    models: tuple[ModelDims, ...] = MODELS,
    micro_batches: tuple[int, ...] = MICRO_BATCHES,
    seq_len: int = SEQ_LEN,
) -> list[Shape]:
    """Deduplicated model GEMM shapes, ordered by micro-batch, then model, then GEMM."""
    seen: set[tuple[int, int, int]] = set()
    out: list[Shape] = []
    for mb in micro_batches:
        for m in models:
            for gemm, n, k in layer_gemms(m):
                key = (mb * seq_len, n, k)
                if key in seen:
                    continue
                seen.add(key)
                out.append(Shape(f"{m.name}.{gemm}.mb{mb}", M=key[0], N=n, K=k))
    return out


def model_shapes_large_m() -> list[Shape]:
    """Model shapes with M >= 8192 (micro-batch 2 and 4)."""
    return [s for s in model_shapes() if s.M >= 8192]


#: Shapes off the tile grid: non-multiples of 16 and 128, M from 1 to 512 (decode, small
#: batches), long K, and odd sizes of every magnitude.
ODD_SHAPES: list[Shape] = [
    Shape("m1.n4096.k4096", M=1, N=4096, K=4096),
    Shape("m7.n3584.k3584", M=7, N=3584, K=3584),
    Shape("m17.n11008.k4096", M=17, N=11008, K=4096),
    Shape("m33.n4100.k8200", M=33, N=4100, K=8200),
    Shape("m100.n1000.k1000", M=100, N=1000, K=1000),
    Shape("m256.n8192.k8192", M=256, N=8192, K=8192),
    Shape("m257.n4608.k3584", M=257, N=4608, K=3584),
    Shape("m383.n1000.k12289", M=383, N=1000, K=12289),
    Shape("m500.n2000.k30000", M=500, N=2000, K=30000),
    Shape("m1000.n5120.k1000", M=1000, N=5120, K=1000),
    Shape("m1000.n1000.k2000", M=1000, N=1000, K=2000),
    Shape("m4000.n4100.k4104", M=4000, N=4100, K=4104),
    Shape("m4097.n3000.k2000", M=4097, N=3000, K=2000),
    Shape("m4097.n6144.k4096", M=4097, N=6144, K=4096),
    Shape("m128.n128.k16384", M=128, N=128, K=16384),
]

#: Where the FP8 dispatch table is measured beyond the odd shapes: decode rows (M = 1, 4), and
#: M = 16 to 4096 on common model widths, so that a Linear call of those widths finds a
#: measured shape within a factor of two along one axis (``dispatch.MAX_DISTANCE``).
DISPATCH_GRID: list[Shape] = [
    Shape(f"m{M}.n{N}.k{K}", M=M, N=N, K=K)
    for M in (1, 4, 16, 64, 256, 1024, 4096)
    for N, K in ((4096, 4096), (14336, 4096), (4096, 14336))
]


def dispatch_shapes() -> list[Shape]:
    """The shapes the FP8 dispatch table is measured on: the odd shapes and the grid (each
    problem once)."""
    odd = {(s.M, s.N, s.K) for s in ODD_SHAPES}
    return list(ODD_SHAPES) + [s for s in DISPATCH_GRID if (s.M, s.N, s.K) not in odd]


#: Interpreter-sized shapes for CPU tests (odd sizes and a ragged 128-group included).
CPU_SHAPES: list[Shape] = [
    Shape("m32.n32.k128", M=32, N=32, K=128),
    Shape("m50.n70.k200", M=50, N=70, K=200),
    Shape("m1.n48.k130", M=1, N=48, K=130),
]


#: Model shapes that guard a dispatch change against regressions where it must not apply.
GUARD_MODEL_SHAPES = (
    "llama2-7b.qkv.mb1",
    "llama3.1-8b.gate_up.mb1",
    "qwen2.5-7b.down.mb1",
    "llama2-70b.attn_out.mb1",
)


def mixed_shapes() -> list[Shape]:
    """The odd shapes and four model shapes: what a campaign deciding a change to the launch
    decisions (buckets, split-K, alignment, dispatch) measures."""
    guard = [s for s in model_shapes() if s.label in GUARD_MODEL_SHAPES]
    return list(ODD_SHAPES) + guard
