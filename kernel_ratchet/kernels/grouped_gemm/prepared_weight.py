"""An expert weight stack quantized for the FP8 grouped step once, used by several steps.

The FP8 step quantizes the whole weight stack every call: a bf16 read and two FP8 copies
written (the 128x128 blocks and their transposed copy for the dgrad), as long as the GEMMs
themselves on layers whose weights outweigh their tokens. Under gradient accumulation the
weight does not change between the micro-batches of one optimizer step, so the caller may
quantize it once, after each optimizer step, and pass it to every micro-batch's step:

    prepared = prepare_weight(w)               # after each optimizer step
    out = grouped_gemm_fp8_blockwise(x, w, group_lens, prepared=prepared)

The caller says when the weight changes, as with an FP8 weight kept for the first
micro-batch of a step in other FP8 training libraries; nothing is cached behind the caller's
back. A prepared weight remembers which tensor and which version of it it was taken from: an
in-place update of the weight (an optimizer step) or another tensor makes its use an error
that says to prepare it again, never a step on stale values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernel_ratchet.kernels.grouped_gemm.weight_quant import quant_weight_128x128
from kernel_ratchet.kernels.quant.launch import Fp8Quantized


@dataclass(frozen=True)
class PreparedWeight:
    """``w`` [G, N, K] quantized in 128x128 blocks with its transposed copy, and what it was
    taken from: the tensor's storage, shape and version counter."""

    quantized: Fp8Quantized
    data_ptr: int
    shape: tuple[int, ...]
    version: int

    def for_weight(self, w: torch.Tensor) -> Fp8Quantized:
        """The quantized copies, after checking that they were taken from ``w`` as it is now;
        ValueError (what to do) otherwise."""
        if w.data_ptr() != self.data_ptr or tuple(w.shape) != self.shape:
            raise ValueError(
                "the prepared FP8 weight was taken from another tensor "
                f"(shape {self.shape}, not {tuple(w.shape)}, or other storage): prepare this "
                "weight with prepare_weight(w) and pass that"
            )
        if w._version != self.version:
            raise ValueError(
                "the weight changed since its FP8 copy was prepared (an in-place update, "
                "e.g. an optimizer step): call prepare_weight(w) again after each update"
            )
        return self.quantized


def prepare_weight(w: torch.Tensor) -> PreparedWeight:
    """Quantize ``w`` [G, N, K] for the FP8 grouped step (both copies, one pass), to be
    passed as ``prepared=`` to every step until ``w`` changes."""
    if w.dim() != 3:
        raise ValueError(f"w must be [G, N, K], got shape {tuple(w.shape)}")
    with torch.no_grad():
        q = quant_weight_128x128(w.detach(), transpose=True)
    return PreparedWeight(q, w.data_ptr(), tuple(w.shape), w._version)


__all__ = ["PreparedWeight", "prepare_weight"]
