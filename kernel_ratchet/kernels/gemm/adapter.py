"""Harness adapters of the dense GEMM ops (``ratchet.yaml: ops.<op>.adapter``).

Ops: ``gemm_bf16`` (:class:`GemmBf16`), ``gemm_fp8_tensorwise``, ``gemm_fp8_rowwise``,
``gemm_fp8_blockwise`` (E4M3 gradients; ``*E5M2`` variants quantize ``dout`` to E5M2).
:class:`GemmFp16` is the 16-bit op on fp16, for interpreter runs (the Triton 3.6 interpreter
computes ``tl.dot`` of bf16 operands wrongly).

Inputs of a case are a Linear layer's: activations ``a ~ N(0, 1)`` ``[M, K]``, weights
``b ~ N(0, 1/K)`` ``[N, K]``, upstream gradient ``dout ~ N(0, 1)`` ``[M, N]``, all fresh from
the seed. ``forward`` times the op's full forward (FP8: quantization included), ``backward``
the full backward from the state the forward left. ``outputs`` goes through the autograd
Functions, so the checked path is the one training uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from kernel_ratchet.harness.adapter import SNR_BF16, SNR_E4M3, SNR_E5M2, Adapter, Shape
from kernel_ratchet.kernels.gemm.fp8 import (
    E4M3,
    E5M2,
    Fp8Recipe,
    fp8_linear,
    gemm_fp8_backward,
    gemm_fp8_forward,
)
from kernel_ratchet.kernels.gemm.launch import gemm, gemm_backward, linear_gemm
from kernel_ratchet.kernels.gemm.reference import linear_all_ref


@dataclass
class GemmCase:
    """Inputs of one shape plus what the last forward left for the backward."""

    a: torch.Tensor
    b: torch.Tensor
    dout: torch.Tensor
    state: dict[str, Any] = field(default_factory=dict)


def make_linear_inputs(shape: Shape, seed: int, device: str, dtype: torch.dtype) -> GemmCase:
    """Fresh random Linear inputs (never zeros) for ``shape`` from ``seed``."""
    # Drawn on the target device: CPU generation of a 16384 x 59136 gradient takes seconds.
    g = torch.Generator(device=device).manual_seed(seed)
    M, N, K = shape.M, shape.N, shape.K

    def draw(*size: int, std: float) -> torch.Tensor:
        x = torch.randn(*size, generator=g, device=device, dtype=torch.float32)
        return (x * std).to(dtype)

    return GemmCase(a=draw(M, K, std=1.0), b=draw(N, K, std=K**-0.5), dout=draw(M, N, std=1.0))


class _GemmAdapter(Adapter):
    schema: ClassVar[str] = "gemm"
    has_backward: ClassVar[bool] = True
    dtype: ClassVar[torch.dtype] = torch.bfloat16

    def make_case(self, shape: Shape, seed: int, device: str) -> GemmCase:
        return make_linear_inputs(shape, seed, device, self.dtype)

    def training_roles(self, case: GemmCase) -> dict[str, str]:
        """Roles in a training step, for the transfer guard's fresh-tensor simulation."""
        return {"a": "activation", "b": "weight", "dout": "grad_out"}

    def reference(self, case: GemmCase) -> dict[str, torch.Tensor]:
        return linear_all_ref(case.a, case.b, case.dout)

    def spot_reference(self, case: GemmCase) -> dict[str, torch.Tensor]:
        """On a GPU, cuBLAS in the inputs' own precision (fp32 accumulation): about 14x cheaper
        than the fp32 reference with TF32 off, whose backward took ~1 s per spot check on a
        16384x59136x8192 GEMM, and ~50 dB from a correct bf16 result, far above every
        threshold. On the CPU, the reference itself."""
        if case.a.device.type != "cuda":
            return self.reference(case)
        a, b, dout = case.a, case.b, case.dout
        return {"out": a @ b.t(), "da": dout @ b, "db": dout.t() @ a}

    def flops(self, shape: Shape) -> tuple[float, float]:
        mnk = float(shape.M) * shape.N * shape.K * shape.B
        return 2.0 * mnk, 4.0 * mnk

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        """Interface bytes: fwd reads a, b, writes out; bwd reads dout, a, b, writes da, db."""
        M, N, K = shape.M, shape.N, shape.K
        es = torch.tensor([], dtype=self.dtype).element_size()
        return es * (M * K + N * K + M * N), es * (M * N + 2 * M * K + 2 * N * K)

    def _autograd(self, case: GemmCase, fn: Any) -> dict[str, torch.Tensor]:
        a = case.a.detach().clone().requires_grad_(True)
        b = case.b.detach().clone().requires_grad_(True)
        out = fn(a, b)
        out.backward(case.dout)
        return {"out": out.detach(), "da": a.grad, "db": b.grad}


class GemmBf16(_GemmAdapter):
    """``gemm_bf16``: bf16 Linear ``a @ bᵀ`` and its two backward GEMMs."""

    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_BF16}

    def forward(self, case: GemmCase) -> torch.Tensor:
        return gemm(case.a, case.b)

    def backward(self, case: GemmCase) -> tuple[torch.Tensor, torch.Tensor]:
        return gemm_backward(case.dout, case.a, case.b)

    def outputs(self, case: GemmCase) -> dict[str, torch.Tensor]:
        return self._autograd(case, linear_gemm)


class GemmFp16(GemmBf16):
    """The 16-bit op on fp16 inputs (interpreter runs: bf16 ``tl.dot`` is wrong there)."""

    dtype: ClassVar[torch.dtype] = torch.float16


class _GemmFp8(_GemmAdapter):
    granularity: ClassVar[str] = "blockwise"
    grad_dtype: ClassVar[torch.dtype] = E4M3
    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_E4M3}
    #: the measured dispatch table may send a shape to the 16-bit path (:mod:`.dispatch`)
    dispatch: ClassVar[bool] = True

    @property
    def recipe(self) -> Fp8Recipe:
        return Fp8Recipe(self.granularity, self.grad_dtype, self.dispatch)

    def forward(self, case: GemmCase) -> torch.Tensor:
        out, case.state = gemm_fp8_forward(case.a, case.b, self.recipe)
        return out

    def backward(self, case: GemmCase) -> tuple[torch.Tensor, torch.Tensor]:
        if not case.state:
            self.forward(case)
        return gemm_fp8_backward(case.dout, case.state, self.recipe)

    def outputs(self, case: GemmCase) -> dict[str, torch.Tensor]:
        return self._autograd(case, lambda a, b: fp8_linear(a, b, self.recipe))


class GemmFp8Tensorwise(_GemmFp8):
    """``gemm_fp8_tensorwise``: one scale per tensor, E4M3 everywhere."""

    granularity: ClassVar[str] = "tensorwise"


class GemmFp8Rowwise(_GemmFp8):
    """``gemm_fp8_rowwise``: one scale per row of each K-major operand, E4M3 everywhere."""

    granularity: ClassVar[str] = "rowwise"


class GemmFp8Blockwise(_GemmFp8):
    """``gemm_fp8_blockwise``: DeepSeek-V3 scaling (1x128 activations, 128x128 weights)."""

    granularity: ClassVar[str] = "blockwise"


class GemmFp8BlockwisePath(GemmFp8Blockwise):
    """The blockwise FP8 path itself, with the dispatch off: what a change to the FP8 kernels is
    measured on where the shipped table sends the Linear to the 16-bit path (odd shapes)."""

    dispatch: ClassVar[bool] = False


_E5M2_SNR: dict[str, float] = {"out": SNR_E4M3, "da": SNR_E5M2, "db": SNR_E5M2}


class GemmFp8TensorwiseE5M2(GemmFp8Tensorwise):
    """Tensorwise with ``dout`` in E5M2 (gradient thresholds 20 dB)."""

    grad_dtype: ClassVar[torch.dtype] = E5M2
    min_snr_db: ClassVar[dict[str, float]] = _E5M2_SNR


class GemmFp8RowwiseE5M2(GemmFp8Rowwise):
    """Rowwise with ``dout`` in E5M2 (gradient thresholds 20 dB)."""

    grad_dtype: ClassVar[torch.dtype] = E5M2
    min_snr_db: ClassVar[dict[str, float]] = _E5M2_SNR


class GemmFp8BlockwiseE5M2(GemmFp8Blockwise):
    """Blockwise with ``dout`` in E5M2 (gradient thresholds 20 dB)."""

    grad_dtype: ClassVar[torch.dtype] = E5M2
    min_snr_db: ClassVar[dict[str, float]] = _E5M2_SNR


ADAPTERS: dict[str, type[_GemmAdapter]] = {
    "gemm_bf16": GemmBf16,
    "gemm_fp8_tensorwise": GemmFp8Tensorwise,
    "gemm_fp8_rowwise": GemmFp8Rowwise,
    "gemm_fp8_blockwise": GemmFp8Blockwise,
}
