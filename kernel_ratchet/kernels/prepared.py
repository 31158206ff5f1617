"""A weight quantized to FP8 once and used by several training steps, with a guard against
using it after the weight changed.

Under gradient accumulation the weight does not change between the micro-batches of one
optimizer step, so its FP8 copies may be made once, after each optimizer step, and passed to
every micro-batch's step instead of quantizing the weight again in each. The caller says when
the weight changes; nothing is cached behind the caller's back. A prepared weight remembers
which tensor and which version of it it was taken from: an in-place update of the weight (an
optimizer step) or another tensor makes its use an error that says to prepare it again, never
a step on stale values. The FP8 Linear (:mod:`.gemm.prepared_weight`) and the grouped FP8 GEMM
(:mod:`.grouped_gemm.prepared_weight`) each say how they quantize the weight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernel_ratchet.kernels.quant.launch import Fp8Quantized


@dataclass(frozen=True)
class PreparedWeight:
    """A weight's FP8 copies (the 128x128 blocks and their transposed copy), and what they
    were taken from: the tensor's storage, shape and version counter."""

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


def prepared(w: torch.Tensor, quantize: Callable[[torch.Tensor], Fp8Quantized]) -> PreparedWeight:
    """``w`` quantized by ``quantize`` (outside autograd), with what it was taken from."""
    with torch.no_grad():
        q = quantize(w.detach())
    return PreparedWeight(q, w.data_ptr(), tuple(w.shape), w._version)
