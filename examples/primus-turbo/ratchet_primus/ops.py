"""Primus-Turbo's ops in the form a ``ratchet.yaml`` description calls: tensors in, tensors out.

Each ``*_turbo`` function calls the library's own op with the arguments a YAML description cannot
write (a quantization config, balanced group lengths); each ``*_reference`` is plain PyTorch.
Importing this module needs torch only: Primus-Turbo is imported at the first call, after the
GEMM and grouped-GEMM backends are pinned to Triton (unless already set), so that a campaign
measures the Triton kernel files it edits and not a vendor library.
"""

from __future__ import annotations

import os

import torch

os.environ.setdefault("PRIMUS_TURBO_GEMM_BACKEND", "TRITON")
os.environ.setdefault("PRIMUS_TURBO_GROUPED_GEMM_BACKEND", "TRITON")


def _turbo():
    import primus_turbo.pytorch as turbo

    return turbo


def _fp8_tensorwise():
    from primus_turbo.pytorch.core.low_precision import (
        Float8QuantConfig,
        Format,
        ScalingGranularity,
    )

    return Float8QuantConfig(format=Format.E4M3, granularity=ScalingGranularity.TENSORWISE)


def _balanced(a: torch.Tensor, groups: int) -> torch.Tensor:
    if a.shape[0] % groups:
        raise ValueError(f"M={a.shape[0]} rows do not split evenly into G={groups} groups")
    return torch.full((groups,), a.shape[0] // groups, dtype=torch.int64, device=a.device)


def gemm_turbo(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [M, K] @ b [N, K]^T`` by turbo.ops.gemm (NT layout, as the benchmark calls it)."""
    return _turbo().ops.gemm(a, b, trans_a=False, trans_b=True)


def gemm_fp8_turbo(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The same product by turbo.ops.gemm_fp8, E4M3 tensorwise scaling."""
    return _turbo().ops.gemm_fp8(a, b, trans_a=False, trans_b=True, config=_fp8_tensorwise())


def grouped_gemm_turbo(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [M, K]`` in G equal groups of rows, each times its ``b [G, N, K]`` transposed."""
    return _turbo().ops.grouped_gemm(a, b, _balanced(a, b.shape[0]), trans_b=True)


def grouped_gemm_fp8_turbo(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The grouped product by turbo.ops.grouped_gemm_fp8, E4M3 tensorwise scaling."""
    lens = _balanced(a, b.shape[0])
    return _turbo().ops.grouped_gemm_fp8(a, b, lens, trans_b=True, config=_fp8_tensorwise())


def grouped_gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Plain PyTorch: one matmul per group of rows."""
    chunks = a.chunk(b.shape[0], dim=0)
    return torch.cat([x @ w.transpose(0, 1) for x, w in zip(chunks, b, strict=True)], dim=0)


def quantize_fp8_tensorwise_turbo(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """turbo's tensorwise FP8 quantization: the FP8 tensor and its inverse scale (shape [1])."""
    from primus_turbo.pytorch.core.low_precision import ScalingGranularity
    from primus_turbo.pytorch.ops import quantize_fp8

    turbo = _turbo()
    q, scale_inv = quantize_fp8(x, turbo.float8_e4m3, granularity=ScalingGranularity.TENSORWISE)
    return q, scale_inv.reshape(1)


def quantize_fp8_tensorwise_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch: scale by the FP8 maximum over the tensor's absolute maximum, saturate."""
    fp8 = _turbo().float8_e4m3
    fmax = torch.finfo(fp8).max
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = fmax / amax
    q = (x.float() * scale).clamp(-fmax, fmax).to(fp8)
    return q, (1.0 / scale).reshape(1)
