"""FP8 Linear GEMM ``out = a @ bᵀ`` with tensorwise, rowwise or blockwise scaling, and backward.

Every GEMM here runs :func:`kernel_ratchet.kernels.gemm.launch.matmul` on K-major FP8 operands
produced by :mod:`kernel_ratchet.kernels.quant.launch`. Forward operands are E4M3; the gradient
``dout`` is E4M3 or E5M2 (:attr:`Fp8Recipe.grad_dtype`). Output and gradients are bf16.

Which quantization each GEMM consumes (K = the GEMM's contraction):

=============  ====================  =========================  =========================
recipe         out = a @ bᵀ (K)      da = dout @ b (K = N)      db = doutᵀ @ a (K = M)
=============  ====================  =========================  =========================
tensorwise     a, b: one scale       dout, bᵀ (b's scale)       doutᵀ, aᵀ (same scales)
rowwise        a, b per row          dout, bᵀ per row           doutᵀ, aᵀ per row
blockwise      a 1x128, b 128x128    dout 1x128, bᵀ 128x128     doutᵀ 1x128, aᵀ 1x128
=============  ====================  =========================  =========================

On shapes where the measured table of :mod:`.dispatch` found the FP8 step slower than the
16-bit one, :func:`gemm_fp8_forward` and :func:`gemm_fp8_backward` run the 16-bit Linear
instead (``Fp8Recipe.dispatch=False`` forces FP8, as the benchmark does to fill that table).

Forward saves for backward only what the forward's own quantization produced in the same
launch (SPEC section 8, K4): the transposed FP8 copy of ``b`` (tensorwise, blockwise; from a
weight the caller prepared, :mod:`.prepared_weight`, where it passes one) and of ``a``
(tensorwise; blockwise where the dual pass writes it). Everything else is quantized in
backward from the saved bf16 tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernel_ratchet.kernels.gemm.dispatch import fp8_path
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK, SCALE_ROW, SCALE_TENSOR
from kernel_ratchet.kernels.gemm.launch import gemm, gemm_backward, matmul
from kernel_ratchet.kernels.gemm.operands import rows
from kernel_ratchet.kernels.prepared import PreparedWeight
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.launch import (
    Fp8Quantized,
    quant_fp8_block_128x128,
    quant_fp8_blockwise_1x128,
    quant_fp8_rowwise,
    quant_fp8_tensorwise,
)

GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
#: Row stride (elements) of every FP8 operand the quantizations write: 16 bytes, so that each
#: GEMM operand is TMA-eligible and its pointer loads are vectorized whatever M, N, K are.
#: Contiguous FP8 copies of a tensor with a dimension off 16 (``dout [4097, 3000]``) fall back
#: to byte-wise loads, and two of the three GEMMs of such a step run on that path.
ALIGN = 16
E4M3 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2


@dataclass(frozen=True)
class Fp8Recipe:
    """How an FP8 Linear quantizes. ``grad_dtype`` applies to ``dout`` in backward;
    ``dispatch`` lets the measured table send a shape to the 16-bit path (:mod:`.dispatch`)."""

    granularity: str = "blockwise"
    grad_dtype: torch.dtype = E4M3
    dispatch: bool = True

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}"
            )
        if self.grad_dtype not in (E4M3, E5M2):
            raise ValueError("grad_dtype must be torch.float8_e4m3fn or torch.float8_e5m2")


def dual_ok(t: torch.Tensor) -> bool:
    """Whether the blockwise recipe quantizes ``t`` [rows, cols] both ways in one read
    (:func:`quant_fp8_dual_1x128`, bit for bit the two single-direction passes). The dual
    pass writes the row-wise copy unpadded, so its FP8 rows must already be ``ALIGN``-byte
    aligned for the GEMMs' loads; other widths keep the single-direction passes, which pad."""
    return t.shape[1] % ALIGN == 0


def quant_weight_blockwise(b: torch.Tensor) -> Fp8Quantized:
    """``b [N, K]`` in 128x128 blocks with its transposed copy, as the blockwise recipe
    quantizes the weight (both copies 16-byte aligned)."""
    return quant_fp8_block_128x128(b, E4M3, with_transpose=True, align=ALIGN)


def gemm_fp8_forward(
    a: torch.Tensor, b: torch.Tensor, recipe: Fp8Recipe, qb: Fp8Quantized | None = None
) -> tuple[torch.Tensor, dict[str, Any]]:
    """``a [M, K] @ b [N, K]ᵀ`` in FP8 -> (bf16 ``[M, N]``, state for :func:`gemm_fp8_backward`).
    ``qb``: ``b`` already quantized by :func:`quant_weight_blockwise` (blockwise recipe), used
    instead of quantizing it here."""
    g = recipe.granularity
    if recipe.dispatch and fp8_path(g, a.shape[0], b.shape[0], a.shape[1]) == "bf16":
        # the 16-bit path multiplies one dtype: a's where it is 16-bit, else bf16 (the FP8
        # path takes any float operands, so a shape's route must not decide what is accepted)
        dt = a.dtype if a.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        a16, b16 = a.to(dt), b.to(dt)
        return gemm(a16, b16).to(torch.bfloat16), {"a16": a16, "b16": b16}
    if g == "tensorwise":
        qa = quant_fp8_tensorwise(a, E4M3, with_transpose=True, align=ALIGN)
        qb = quant_fp8_tensorwise(b, E4M3, with_transpose=True, align=ALIGN)
        out = matmul(
            qa.data,
            qb.data,
            scale_mode=SCALE_TENSOR,
            a_scale=qa.scale,
            b_scale=qb.scale,
            kind="fp8",
        )
        return out, {"at": qa.data_t, "sa": qa.scale, "bt": qb.data_t, "sb": qb.scale}
    if g == "rowwise":
        qa = quant_fp8_rowwise(a, E4M3, align=ALIGN)
        qb = quant_fp8_rowwise(b, E4M3, align=ALIGN)
        out = matmul(
            qa.data, qb.data, scale_mode=SCALE_ROW, a_scale=qa.scale, b_scale=qb.scale, kind="fp8"
        )
        return out, {"a": a, "b": b}
    if dual_ok(a):  # both copies from one read; aᵀ kept for the weight gradient
        qa, qat = quant_fp8_dual_1x128(a, E4M3, pad_t_to=ALIGN)
        kept = {"at": qat.data, "sat": qat.scale}
    else:
        qa, kept = quant_fp8_blockwise_1x128(a, E4M3, align=ALIGN), {"a": a}
    qb = qb if qb is not None else quant_weight_blockwise(b)
    out = matmul(
        qa.data,
        qb.data,
        scale_mode=SCALE_BLOCK,
        a_scale=qa.scale,
        b_scale=qb.scale,
        b_scale_group_n=128,
        kind="fp8_block",
    )
    return out, {**kept, "bt": qb.data_t, "sbt": qb.scale_t}


def gemm_fp8_backward(
    dout: torch.Tensor, state: dict[str, Any], recipe: Fp8Recipe
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(da, db)`` of the FP8 Linear from the forward's state; both bf16."""
    g, gd = recipe.granularity, recipe.grad_dtype
    dout = dout.contiguous()
    if "a16" in state:  # the forward took the 16-bit path
        da, db = gemm_backward(dout.to(state["a16"].dtype), state["a16"], state["b16"])
        return da.to(torch.bfloat16), db.to(torch.bfloat16)
    if g == "tensorwise":
        qd = quant_fp8_tensorwise(dout, gd, with_transpose=True, align=ALIGN)
        da = matmul(
            qd.data,
            state["bt"],
            scale_mode=SCALE_TENSOR,
            a_scale=qd.scale,
            b_scale=state["sb"],
            kind="fp8",
        )
        db = matmul(
            qd.data_t,
            state["at"],
            scale_mode=SCALE_TENSOR,
            a_scale=qd.scale,
            b_scale=state["sa"],
            kind="fp8",
        )
        return da, db
    if g == "rowwise":
        a, b = state["a"], state["b"]
        qd = quant_fp8_rowwise(dout, gd, align=ALIGN)
        qbt = quant_fp8_rowwise(b, E4M3, transpose=True, align=ALIGN)
        da = matmul(
            qd.data, qbt.data, scale_mode=SCALE_ROW, a_scale=qd.scale, b_scale=qbt.scale, kind="fp8"
        )
        qdt = quant_fp8_rowwise(dout, gd, transpose=True, align=ALIGN)
        qat = quant_fp8_rowwise(a, E4M3, transpose=True, align=ALIGN)
        db = matmul(
            qdt.data,
            qat.data,
            scale_mode=SCALE_ROW,
            a_scale=qdt.scale,
            b_scale=qat.scale,
            kind="fp8",
        )
        return da, db
    if dual_ok(dout):  # both copies of dout from one read
        qd, qdt = quant_fp8_dual_1x128(dout, gd, pad_t_to=ALIGN)
    else:
        qd, qdt = quant_fp8_blockwise_1x128(dout, gd, align=ALIGN), None
    da = matmul(
        qd.data,
        state["bt"],
        scale_mode=SCALE_BLOCK,
        a_scale=qd.scale,
        b_scale=state["sbt"],
        b_scale_group_n=128,
        kind="fp8_block",
    )
    if qdt is None:
        qdt = quant_fp8_blockwise_1x128(dout, gd, transpose=True, align=ALIGN)
    if "at" in state:
        qat = Fp8Quantized(state["at"], state["sat"])
    else:
        qat = quant_fp8_blockwise_1x128(state["a"], E4M3, transpose=True, align=ALIGN)
    db = matmul(
        qdt.data,
        qat.data,
        scale_mode=SCALE_BLOCK,
        a_scale=qdt.scale,
        b_scale=qat.scale,
        b_scale_group_n=1,
        kind="fp8_block",
    )
    return da, db


class Fp8GemmFunction(torch.autograd.Function):
    """``out = a @ bᵀ`` through FP8 in forward and backward, by :class:`Fp8Recipe`."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        a: torch.Tensor,
        b: torch.Tensor,
        recipe: Fp8Recipe,
        prepared: PreparedWeight | None = None,
    ) -> torch.Tensor:
        qb = None if prepared is None else prepared.for_weight(b)
        out, state = gemm_fp8_forward(a, b, recipe, qb)
        names = sorted(k for k, v in state.items() if isinstance(v, torch.Tensor))
        ctx.names = names
        ctx.save_for_backward(*(state[k] for k in names))
        ctx.recipe = recipe
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):  # type: ignore[override]
        state = dict(zip(ctx.names, ctx.saved_tensors, strict=True))
        da, db = gemm_fp8_backward(dout, state, ctx.recipe)
        return da, db, None, None


def fp8_linear(
    a: torch.Tensor,
    b: torch.Tensor,
    recipe: Fp8Recipe | None = None,
    *,
    prepared: PreparedWeight | None = None,
) -> torch.Tensor:
    """Autograd entry point: ``a @ bᵀ`` in FP8 (default recipe: blockwise, E4M3 gradients);
    ``a`` may have leading dimensions (``[B, S, K]`` -> ``[B, S, N]``). ``prepared``: ``b``
    quantized by :func:`.prepared_weight.prepare_weight` since its last change (blockwise
    recipe), used instead of quantizing it again (gradient accumulation); the gradient still
    flows to ``b``, and the results are bit for bit those of quantizing it here."""
    recipe = recipe or Fp8Recipe()
    if prepared is not None and recipe.granularity != "blockwise":
        raise ValueError(
            f"a prepared weight holds 128x128 blocks, for the blockwise recipe; this recipe is "
            f"{recipe.granularity!r}: call without prepared="
        )
    a2, lead = rows(a)
    out = Fp8GemmFunction.apply(a2, b, recipe, prepared)
    return out if a.dim() == 2 else out.reshape(*lead, out.shape[-1])
