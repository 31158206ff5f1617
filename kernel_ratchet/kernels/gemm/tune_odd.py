"""``python -m kernel_ratchet.kernels.gemm.tune --only odd`` (and ``skinny``, ``decode``): the
bf16 GEMM's tiles, split-K and epilogues on off-grid shapes, next to cuBLAS.

The bf16 rows of docs/odd-shapes.md furthest from cuBLAS whose GPU work, not the host's, keeps
them there (partial 128-row tiles, few output tiles, split-K's extra launches), and two model
shapes a bucket change must not slow: each shape's forward, dgrad and wgrad under the shipped
bucket's config and under every :data:`ODD_BF16` config, checked (SNR against fp32) and timed
as :mod:`.tune_cases` does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from kernel_ratchet.kernels.gemm import bf16_ws_launch, tune_cases
from kernel_ratchet.kernels.gemm.configs import FewRowsWgrad
from kernel_ratchet.kernels.gemm.configs import GemmConfig as C
from kernel_ratchet.kernels.gemm.launch import few_rows_wgrad, matmul
from kernel_ratchet.kernels.gemm.tune_cases import bench, run_cases

#: The shapes swept, and the configs tried on each.
ODD_SHAPES = [
    (257, 4608, 3584),
    (1000, 1000, 2000),
    (1000, 5120, 1000),
    (4097, 3000, 2000),
    (500, 2000, 30000),
    (64, 4096, 4096),
    (256, 4096, 4096),
    (383, 1000, 12289),
    (128, 128, 16384),
]
_FLAT_TILES = [(128, 256, 8, 3), (128, 256, 8, 4), (128, 128, 8, 4), (128, 128, 4, 4)]
_FLAT_TILES += [(64, 128, 4, 4), (128, 64, 4, 4)]
FLAT = {"flatten": True, "tma_store": 2}
ODD_BF16 = [
    C(64, 128, 64, num_warps=4, num_stages=4, use_tma=True),
    C(128, 128, 64, num_warps=8, num_stages=4, use_tma=True),
    C(128, 128, 64, num_warps=8, num_stages=4, use_tma=True, split_k=2),
    C(128, 64, 64, num_warps=4, num_stages=4, use_tma=True),
    C(64, 64, 128, num_warps=4, num_stages=4, use_tma=True),
    C(128, 256, 64, num_warps=8, num_stages=4, persistent=True, use_tma=True),
    # TMA-stored epilogues, and persistent programs whose tile and k loops are one pipeline
    C(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, tma_store=1),
    C(128, 128, 64, num_warps=8, num_stages=4, use_tma=True, tma_store=1),
    C(128, 256, 64, num_warps=8, num_stages=3, use_tma=True, tma_store=2),
    *(
        C(bm, bn, 64, num_warps=w, num_stages=st, persistent=True, use_tma=True, **FLAT)
        for bm, bn, w, st in _FLAT_TILES
    ),
    # stream-K: every SM the same number of k-iterations (wave tails, few tiles, long K)
    C(128, 128, 64, num_warps=8, num_stages=4, use_tma=True, stream_k=True, tma_store=2),
    C(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, stream_k=True),
]


@dataclass(frozen=True)
class Ws16:
    """A launch of the warp-specialized 16-bit kernel (:mod:`.bf16_ws`): a candidate of a
    ``configs.WS16_CONFIGS`` entry (128-row tiles), for the forward and the dgrad."""

    block_n: int
    stages: int
    block_k: int = 64
    group_m: int = 8


#: ``--only odd`` and ``skinny`` on a GPU also time the forward and the dgrad on the
#: warp-specialized kernel under these launches (its 128 x 256 tile ships for the large bucket).
WS16_CANDIDATES = [Ws16(256, 3), Ws16(128, 4), Ws16(128, 6)]
#: Model shapes (M >= 4096) that a bucket change must not slow down, swept beside them.
GUARD_SHAPES = [(4096, 6144, 4096), (8192, 4096, 14336)]

#: ``--only skinny``: Linears of 64 to 256 rows on model widths (prefill chunks, micro-batches),
#: under the :data:`ODD_BF16` configs. Their weight gradient is a large output over a
#: contraction of the rows alone (one to four 64-wide k steps per tile), where each tile's
#: pipeline fill and epilogue weigh most.
SKINNY_SHAPES = [
    (64, 4096, 4096),
    (64, 14336, 4096),
    (128, 4096, 14336),
    (256, 4096, 4096),
    (256, 14336, 4096),
    (256, 4096, 14336),
    (256, 8192, 8192),
]

#: ``--only decode``: decode rows and small outputs (the tiny bucket), forward and dgrad. Their
#: weights stream once per call, so a tile of 64 rows holding one to 33 of them wastes its MMA
#: work but not its bandwidth; what matters is how many programs stream the weights at once.
DECODE_SHAPES = [
    (1, 4096, 4096),
    (4, 14336, 4096),
    (16, 4096, 14336),
    (7, 3584, 3584),
    (17, 11008, 4096),
    (33, 4100, 8200),
    (100, 1000, 1000),
]
DECODE_BF16 = [
    *(
        C(bm, bn, bk, num_warps=4, num_stages=st, use_tma=True)
        for bm, bn, bk, st in [
            (16, 64, 128, 4),
            (16, 128, 128, 4),
            (16, 64, 256, 3),
            (16, 32, 256, 4),
            (16, 64, 128, 6),
            (32, 64, 128, 4),
            (64, 32, 128, 4),
            (64, 64, 64, 6),
        ]
    ),  # fmt: skip
    C(16, 64, 128, num_warps=4, num_stages=4),
    C(16, 64, 128, num_warps=4, num_stages=4, use_tma=True, split_k=4),
    C(64, 64, 128, num_warps=4, num_stages=4, use_tma=True, split_k=4),
    C(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, stream_k=True),
]


def sweep_decode(
    M: int, N: int, K: int, g: torch.Generator, t0: float, budget_s: float, results: list[dict]
) -> None:
    """``--only decode``: :func:`sweep_shape` of the forward and dgrad, :data:`DECODE_BF16`."""
    sweep_shape(M, N, K, g, t0, budget_s, results, DECODE_BF16, ("bf16.fwd", "bf16.da"))


def sweep_shape(
    M: int,
    N: int,
    K: int,
    g: torch.Generator,
    t0: float,
    budget_s: float,
    results: list[dict],
    configs: list[C] = ODD_BF16,
    what: tuple[str, ...] = ("bf16.fwd", "bf16.da", "bf16.db"),
    ws: list[Ws16] | None = None,
) -> None:
    """``--only odd``: cuBLAS and the bf16 forward, dgrad and wgrad (``what``) under the
    shipped bucket's config and under every one of ``configs``, on one off-grid shape; the
    forward and dgrad also under every ``ws`` launch of the warp-specialized kernel (default:
    :data:`WS16_CANDIDATES` on a GPU with the ``ODD_BF16`` configs, none else)."""

    def rnd(*s: int) -> torch.Tensor:
        return torch.randn(*s, device=tune_cases.DEVICE, dtype=torch.bfloat16, generator=g)

    a, b, d = rnd(M, K), rnd(N, K) * K**-0.5, rnd(M, N)
    gemms = {
        "bf16.fwd": (lambda c: matmul(a, b, config=c), a.float() @ b.float().t()),
        "bf16.da": (lambda c: matmul(d, b, b_kmajor=False, config=c), d.float() @ b.float()),
        "bf16.db": (
            lambda c: matmul(d, a, a_kmajor=False, b_kmajor=False, config=c),
            d.float().t() @ a.float(),
        ),
    }
    vend = {
        "bf16.fwd": bench(lambda: a @ b.t()),
        "bf16.da": bench(lambda: d @ b),
        "bf16.db": bench(lambda: d.t() @ a),
    }
    cases = [(w, cfg, *gemms[w]) for cfg in [None, *configs] for w in what]
    if ws is None:
        ws = WS16_CANDIDATES if tune_cases.DEVICE == "cuda" and configs is ODD_BF16 else []
    gluon = {"bf16.fwd": (a, b, True), "bf16.da": (d, b, False)}
    cases += [(w, c, _ws16(*gluon[w]), gemms[w][1]) for c in ws for w in what if w in gluon]
    run_cases(M, N, K, cases, {w: vend[w] for w in what}, t0, budget_s, results)


def _ws16(a: torch.Tensor, b: torch.Tensor, b_kmajor: bool):
    """``fn(candidate)``: ``a @ b`` on the warp-specialized 16-bit kernel under a
    :class:`Ws16` launch; ValueError where the kernel does not take the operands here."""

    def run(c: Ws16) -> torch.Tensor:
        if not bf16_ws_launch.supported(a, b, b_kmajor):
            raise ValueError("the warp-specialized 16-bit kernel does not take these operands here")
        return bf16_ws_launch.matmul_bf16_ws(a, b, b_kmajor=b_kmajor, **asdict(c))

    return run


#: ``--only skinny`` also times the weight gradient on the warp-specialized Gluon kernel with
#: one group (:func:`.launch.few_rows_wgrad`) under these configs, bounds lifted so that it
#: runs wherever its operands qualify (the guard shapes included).
FEW_ROWS_WGRADS = [
    FewRowsWgrad(max_rows=1 << 30, min_tiles=0, **kw)
    for kw in (
        {},
        {"stages": 4},
        {"group_n": 1},
        {"group_n": 4},
        {"block_k": 128, "stages": 5},
    )
]


def sweep_skinny(
    M: int, N: int, K: int, g: torch.Generator, t0: float, budget_s: float, results: list[dict]
) -> None:
    """``--only skinny``: :func:`sweep_shape`, then the weight gradient under each of
    :data:`FEW_ROWS_WGRADS` (reported as ``bf16.db``, against cuBLAS's); a config that does
    not run there (operands the kernel does not take, the interpreter) is an error result."""
    sweep_shape(M, N, K, g, t0, budget_s, results)
    d = torch.randn(M, N, device=tune_cases.DEVICE, dtype=torch.bfloat16, generator=g)
    a = torch.randn(M, K, device=tune_cases.DEVICE, dtype=torch.bfloat16, generator=g)

    def gluon(cfg: FewRowsWgrad) -> torch.Tensor:
        out = few_rows_wgrad(d, a, cfg)
        if out is None:
            raise ValueError("the Gluon weight gradient does not take these operands here")
        return out

    cases = [("bf16.db", cfg, gluon, d.float().t() @ a.float()) for cfg in FEW_ROWS_WGRADS]
    run_cases(M, N, K, cases, {"bf16.db": bench(lambda: d.t() @ a)}, t0, budget_s, results)
