"""Plain-PyTorch FP8 quantization (the naive truth for the quant kernels), fp32 arithmetic.

Same recipe as :mod:`kernel_ratchet.kernels.quant.launch`: ``scale = max(amax, 1e-12) / 448``
per group, ``q = clamp(x * (448 / amax), -448, 448)`` cast to E4M3 (round to nearest even).
Each function returns the dequantized tensor (``out = q * scale``, fp32), the scales and the
quantized values themselves (``q``, the fp8 codes as fp32).
"""

from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
EPS = 1e-12


def _quant(x: torch.Tensor, amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    amax = amax.clamp_min(EPS)
    q = (x * (FP8_MAX / amax)).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()
    return q * (amax / FP8_MAX), amax / FP8_MAX, q


def rowwise_ref(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """One scale per row: ``{"out": dequant [R, C], "scale": [R], "q": [R, C]}``."""
    xf = x.float()
    deq, s, q = _quant(xf, xf.abs().amax(dim=1, keepdim=True))
    return {"out": deq, "scale": s[:, 0], "q": q}


def blockwise_1x128_ref(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """1x128 groups along rows: ``{"out": dequant [R, C], "scale": [R, ceil(C/128)],
    "q": [R, C]}``."""
    R, C = x.shape
    nb = -(-C // 128)
    xf = torch.nn.functional.pad(x.float(), (0, nb * 128 - C)).view(R, nb, 128)
    deq, s, q = _quant(xf, xf.abs().amax(dim=2, keepdim=True))
    return {
        "out": deq.view(R, nb * 128)[:, :C],
        "scale": s[..., 0],
        "q": q.view(R, nb * 128)[:, :C],
    }


def dual_1x128_ref(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Row-wise 1x128 and column-wise 128x1 (as xᵀ): ``out``/``scale`` as in
    :func:`blockwise_1x128_ref`, ``out_t`` [C, R] / ``scale_t`` [C, ceil(R/128)] for xᵀ."""
    rows = blockwise_1x128_ref(x)
    cols = blockwise_1x128_ref(x.t())
    return {**rows, "out_t": cols["out"], "scale_t": cols["scale"], "q_t": cols["q"]}
