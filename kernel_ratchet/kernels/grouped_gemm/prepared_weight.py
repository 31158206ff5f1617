"""An expert weight stack quantized for the FP8 grouped step once, used by several steps.

The FP8 step quantizes the whole weight stack every call: a bf16 read and two FP8 copies
written (the 128x128 blocks and their transposed copy for the dgrad), as long as the GEMMs
themselves on layers whose weights outweigh their tokens. Under gradient accumulation the
caller may quantize it once, after each optimizer step, and pass it to every micro-batch's
step (the guard and the caller's part: :mod:`kernel_ratchet.kernels.prepared`):

    prepared = prepare_weight(w)               # after each optimizer step
    out = grouped_gemm_fp8_blockwise(x, w, group_lens, prepared=prepared)
"""

from __future__ import annotations

import torch

from kernel_ratchet.kernels.prepared import PreparedWeight, prepared
from kernel_ratchet.kernels.quant.weight import quant_weight_128x128


def prepare_weight(w: torch.Tensor) -> PreparedWeight:
    """Quantize ``w`` [G, N, K] for the FP8 grouped step (both copies, one pass), to be
    passed as ``prepared=`` to every step until ``w`` changes."""
    if w.dim() != 3:
        raise ValueError(f"w must be [G, N, K], got shape {tuple(w.shape)}")
    return prepared(w, lambda t: quant_weight_128x128(t, transpose=True))


__all__ = ["PreparedWeight", "prepare_weight"]
