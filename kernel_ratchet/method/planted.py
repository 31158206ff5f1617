"""The subject of the method checks: the bundled dense GEMM, its shapes, and variants of it with
a planted effect, run in paired-A/B worker processes.

A planted variant computes a GEMM with ``PAD`` x K while its FLOPs stay those of K, so it is
slower by about that factor. The padded K is rounded to whole K tiles (64 wide on the GPU): a
masked tail tile would cost a whole tile and make a "5%" plant read 8-10%. With the shapes of
:data:`GPU_SHAPES` that is +3.1% K on every shape for the slowdown, +4.7% (K = 4096) and
+4.9% (K = 14336) for the speedup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import kernel_ratchet
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.pinning import paired_cpus
from kernel_ratchet.harness.worker import WorkerSpec
from kernel_ratchet.kernels.gemm.adapter import GemmBf16, GemmCase, GemmFp16, make_linear_inputs

GPU_SHAPES = [
    (4096, 4096, 4096),
    (8192, 4096, 4096),
    (4096, 14336, 4096),
    (4096, 4096, 14336),
    (2048, 6144, 4096),
]
#: Launch-bound shapes: decode rows and a small output (the bf16 decode Linear's op), where a
#: call's host time exceeds its GPU work; the A/A trials on them check the pinned workers.
DECODE_SHAPES = [
    (1, 4096, 4096),
    (7, 3584, 3584),
    (17, 11008, 4096),
    (33, 4100, 8200),
    (100, 1000, 1000),
]
#: Interpreter-sized shapes: the checks run on the CPU too, as a smoke test (not a measurement).
CPU_SHAPES = [(32, 32, 32), (48, 32, 32)]
#: Where the worker processes import ``kernel_ratchet`` from (this installation).
SOURCE_ROOT = str(Path(kernel_ratchet.__file__).resolve().parents[1])


def shapes(dims: list[tuple[int, int, int]]) -> list[Shape]:
    """``Shape`` objects labelled ``m{M}_n{N}_k{K}``."""
    return [Shape(f"m{m}_n{n}_k{k}", m, n, k) for m, n, k in dims]


def base_adapter(cuda: bool) -> str:
    """The plain GEMM's adapter: bf16 on the GPU, fp16 in the interpreter (whose bf16
    ``tl.dot`` is wrong)."""
    return f"kernel_ratchet.kernels.gemm.adapter:Gemm{'Bf16' if cuda else 'Fp16'}"


def worker_spec(
    adapter: str, cuda: bool, params: dict[str, Any], pinned: bool = True
) -> WorkerSpec:
    """A worker running ``adapter`` with the timing ``params`` (``cuda_events`` on the GPU,
    ``perf_counter`` in the interpreter), pinned as a campaign's paired workers are (unless
    ``pinned`` is False: where the scheduler puts it)."""
    return WorkerSpec(
        source_root=SOURCE_ROOT,
        adapter=adapter,
        engine="cuda_events" if cuda else "perf_counter",
        engine_params=dict(params),
        device="cuda" if cuda else "cpu",
        interpret=not cuda,
        cpus=paired_cpus() if cuda and pinned else (),
    )


class _MoreK:
    """Mixin: the case holds a GEMM with ``PAD`` x K while FLOPs stay those of K."""

    PAD = 1.0

    def make_case(self, shape: Shape, seed: int, device: str) -> GemmCase:
        tile = 64 if device == "cuda" else 16  # whole 64-wide K tiles on the GPU: no masked tail
        k = int(round(shape.K * self.PAD / tile)) * tile
        padded = Shape(shape.label, shape.M, shape.N, k, shape.B)
        dtype = torch.bfloat16 if device == "cuda" else torch.float16
        return make_linear_inputs(padded, seed, device, dtype)


class SlowerBf16(_MoreK, GemmBf16):
    """The candidate of the planted-slowdown scenario: 3% more K."""

    PAD = 1.03


class FasterBaselineBf16(_MoreK, GemmBf16):
    """The *incumbent* of the planted-speedup scenario (the candidate is plain): 5% more K."""

    PAD = 1.05


class SlowerFp16(_MoreK, GemmFp16):
    """:class:`SlowerBf16` for the interpreter."""

    PAD = 1.03


class FasterBaselineFp16(_MoreK, GemmFp16):
    """:class:`FasterBaselineBf16` for the interpreter."""

    PAD = 1.05
