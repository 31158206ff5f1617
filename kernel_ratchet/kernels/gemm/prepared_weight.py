"""A Linear weight quantized for the FP8 blockwise Linear once, used by several steps.

The blockwise FP8 Linear quantizes its weight every call: a bf16 read and two FP8 copies
written (the 128x128 blocks and their transposed copy for ``da``). Under gradient accumulation
the caller may quantize it once, after each optimizer step, and pass it to every micro-batch
(the guard and the caller's part: :mod:`kernel_ratchet.kernels.prepared`):

    prepared = prepare_weight(w)               # after each optimizer step
    out = fp8_linear(x, w, prepared=prepared)

Where the dispatch table sends a shape to the 16-bit path, the prepared copies go unused (the
check that they were taken from ``w`` as it is still runs).
"""

from __future__ import annotations

import torch

from kernel_ratchet.kernels.gemm.fp8 import quant_weight_blockwise
from kernel_ratchet.kernels.prepared import PreparedWeight, prepared


def prepare_weight(w: torch.Tensor) -> PreparedWeight:
    """Quantize ``w`` [N, K] for the blockwise FP8 Linear (both copies), to be passed as
    ``prepared=`` to :func:`.fp8.fp8_linear` until ``w`` changes."""
    if w.dim() != 2:
        raise ValueError(f"w must be [N, K], got shape {tuple(w.shape)}")
    return prepared(w, quant_weight_blockwise)


__all__ = ["PreparedWeight", "prepare_weight"]
