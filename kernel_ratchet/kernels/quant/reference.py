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
    # a tensor division, rounded once as the kernels' is: torch computes `448.0 / amax` as
    # amax's reciprocal times 448, a rounding more, which turns some exact ties the other way
    factor = torch.full_like(amax, FP8_MAX) / amax
    q = (x * factor).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()
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


def block_128x128_ref(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """128x128 blocks, one scale each (weights): ``{"out", "scale" [ceil(R/128),
    ceil(C/128)], "q"}`` and the transposed copy ``out_t``/``q_t`` [C, R] with ``scale_t`` =
    ``scale.t()`` (the same blocks)."""
    R, C = x.shape
    nr, nc = -(-R // 128), -(-C // 128)
    xf = torch.nn.functional.pad(x.float(), (0, nc * 128 - C, 0, nr * 128 - R))
    blocks = xf.view(nr, 128, nc, 128)
    deq, s, q = _quant(blocks, blocks.abs().amax(dim=(1, 3), keepdim=True))
    out, q = (t.reshape(nr * 128, nc * 128)[:R, :C] for t in (deq, q))
    scale = s[:, 0, :, 0]
    return {
        "out": out,
        "scale": scale,
        "q": q,
        "out_t": out.t(),
        "q_t": q.t(),
        "scale_t": scale.t(),
    }
