"""Harness adapters of the FP8 quantization ops (schema "memory", forward only).

Compared outputs: ``out`` = the kernel's quantized tensor dequantized (``q * scale``, fp32)
against the plain-PyTorch quantization of the same input dequantized (:mod:`.reference`),
``q`` = the fp8 values themselves, and ``scale`` = the kernel's fp32 scales against the
reference scales (dual adds ``out_t``, ``q_t`` and ``scale_t`` for the column-wise result).
Both use the same rounding, so the SNR is normally +inf; thresholds allow the odd tie rounded
the other way (40 dB) and fp32 noise on the scales (80 dB). ``out_snr`` in the CSV is the SNR
of ``out``. A timed call returns what the kernel returns, fp8 values and scales: the harness
compares them with ``q`` and ``scale`` (:meth:`_QuantAdapter.returned_names`).

``bytes_moved`` = bf16 input read once + every fp8 output written once + fp32 scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from kernel_ratchet.harness.adapter import SNR_BF16, SNR_FP32, Adapter, Shape
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.launch import (
    GROUP,
    Fp8Quantized,
    dequant_fp8,
    quant_fp8_block_128x128,
    quant_fp8_blockwise_1x128,
    quant_fp8_rowwise,
)
from kernel_ratchet.kernels.quant.reference import (
    block_128x128_ref,
    blockwise_1x128_ref,
    dual_1x128_ref,
    rowwise_ref,
)


@dataclass
class QuantCase:
    x: torch.Tensor


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _two_copies(
    rows: Fp8Quantized, cols: Fp8Quantized, group: tuple[int, int]
) -> dict[str, torch.Tensor]:
    """The compared outputs of a quantization with a transposed copy (``cols``)."""
    return {
        "out": dequant_fp8(rows, group=group),
        "scale": rows.scale,
        "q": rows.data,
        "out_t": dequant_fp8(cols, group=group),
        "scale_t": cols.scale,
        "q_t": cols.data,
    }


class _QuantAdapter(Adapter):
    schema: ClassVar[str] = "memory"
    has_backward: ClassVar[bool] = False
    min_snr_db: ClassVar[dict[str, float]] = {
        "out": SNR_BF16,
        "out_t": SNR_BF16,
        "scale": SNR_FP32,
        "scale_t": SNR_FP32,
        "default": SNR_BF16,
    }
    #: What ``forward`` returns, in order (an Fp8Quantized's tensors that are set).
    returned: ClassVar[tuple[str, ...]] = ("q", "scale")

    def returned_names(self, phase: str) -> tuple[str, ...] | None:
        return self.returned if phase == "fwd" else None

    def make_case(self, shape: Shape, seed: int, device: str) -> QuantCase:
        # Drawn on the target device: on the host, a 65536 x 2048 draw took ~1 s per case, and a
        # paired round builds three cases per timed call.
        gen = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn((shape.M, shape.N), generator=gen, device=device) * 3.0
        # A few outliers per tensor, as real activations have: they set the group scales.
        n_out = max(x.numel() // 4096, 1)
        idx = torch.randint(0, max(x.numel(), 1), (n_out,), generator=gen, device=device)
        x.view(-1)[idx] *= 40.0
        return QuantCase(x.to(dtype=torch.bfloat16))

    def training_roles(self, case: QuantCase) -> dict[str, str]:
        """Roles in a training step, for the transfer guard's fresh-tensor simulation."""
        return {"x": "activation"}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (0.0, 0.0)


class QuantFp8RowwiseAdapter(_QuantAdapter):
    """One fp32 scale per row (kernel.quant_fp8_rowwise)."""

    def forward(self, case: QuantCase) -> Any:
        return quant_fp8_rowwise(case.x)

    def outputs(self, case: QuantCase) -> dict[str, torch.Tensor]:
        q = quant_fp8_rowwise(case.x)
        return {"out": dequant_fp8(q), "scale": q.scale, "q": q.data}

    def reference(self, case: QuantCase) -> dict[str, torch.Tensor]:
        return rowwise_ref(case.x)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        return (3.0 * shape.M * shape.N + 4.0 * shape.M, 0.0)


class QuantFp8BlockwiseAdapter(_QuantAdapter):
    """1x128 groups along rows (kernel.quant_fp8_blockwise_1x128)."""

    def forward(self, case: QuantCase) -> Any:
        return quant_fp8_blockwise_1x128(case.x)

    def outputs(self, case: QuantCase) -> dict[str, torch.Tensor]:
        q = quant_fp8_blockwise_1x128(case.x)
        return {"out": dequant_fp8(q, group=(1, 128)), "scale": q.scale, "q": q.data}

    def reference(self, case: QuantCase) -> dict[str, torch.Tensor]:
        return blockwise_1x128_ref(case.x)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        return (3.0 * shape.M * shape.N + 4.0 * shape.M * _cdiv(shape.N, 128), 0.0)


class QuantFp8DualAdapter(_QuantAdapter):
    """Row-wise 1x128 and column-wise 128x1 (transposed) from one read (dual.py)."""

    returned = ("q", "scale", "q_t", "scale_t")

    def forward(self, case: QuantCase) -> Any:
        return quant_fp8_dual_1x128(case.x)

    def outputs(self, case: QuantCase) -> dict[str, torch.Tensor]:
        return _two_copies(*quant_fp8_dual_1x128(case.x), group=(1, 128))

    def reference(self, case: QuantCase) -> dict[str, torch.Tensor]:
        return dual_1x128_ref(case.x)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        M, N = shape.M, shape.N
        scales = 4.0 * (M * _cdiv(N, 128) + N * _cdiv(M, 128))
        return (4.0 * M * N + scales, 0.0)


class QuantFp8Block128Adapter(_QuantAdapter):
    """128x128 blocks with the transposed copy (a weight's two FP8 layouts from one read:
    kernel.quant_fp8_block_128x128 with ``with_transpose``)."""

    returned = ("q", "scale", "q_t", "scale_t")

    def forward(self, case: QuantCase) -> Any:
        return quant_fp8_block_128x128(case.x, with_transpose=True)

    def outputs(self, case: QuantCase) -> dict[str, torch.Tensor]:
        q = quant_fp8_block_128x128(case.x, with_transpose=True)
        assert q.data_t is not None and q.scale_t is not None
        cols = Fp8Quantized(q.data_t, q.scale_t)
        return _two_copies(Fp8Quantized(q.data, q.scale), cols, group=(GROUP, GROUP))

    def reference(self, case: QuantCase) -> dict[str, torch.Tensor]:
        return block_128x128_ref(case.x)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        M, N = shape.M, shape.N
        return (4.0 * M * N + 4.0 * _cdiv(M, 128) * _cdiv(N, 128), 0.0)
