"""bfloat16 arithmetic that is right in the Triton interpreter (CPU rehearsals).

numpy has no bfloat16, so the interpreter keeps a bf16 tensor as its uint16 bit patterns and
then computes on those integers: ``a * b``, ``tl.exp``, ``tl.dot``, ``tl.sum``, ``tl.max`` and
casts to other types of bf16 tensors return garbage, so a correct bf16 kernel fails its
focused test on the CPU. :func:`install` makes every such operation compute in float32 on the
decoded values and round the result back to bf16 (round to nearest even, as the GPU does);
loads, stores, selects and bit operations already work on the patterns and are left alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_NAN_BF16 = np.uint16(0x7FC0)


def to_f32(bits: np.ndarray) -> np.ndarray:
    """float32 values of bf16 bit patterns."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def to_bf16(values: Any) -> np.ndarray:
    """bf16 bit patterns of float values, rounded to nearest even (NaN stays NaN)."""
    x = np.asarray(values, dtype=np.float32)
    u = x.view(np.uint32)
    rounded = ((u + ((u >> 16) & 1) + 0x7FFF) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), _NAN_BF16, rounded)


def install() -> None:
    """Patch the interpreter's builder and reductions (idempotent)."""
    import triton.language as tl
    from triton.runtime import interpreter as ti

    builder, bf16 = ti.InterpreterBuilder, tl.bfloat16
    if getattr(builder, "_ratchet_bf16", False):
        return
    handle = ti.TensorHandle

    def is_bf(h: Any) -> bool:
        return getattr(h, "dtype", None) is not None and h.dtype.scalar == bf16

    def f32(h: Any) -> np.ndarray:
        return to_f32(h.data) if is_bf(h) else h.data

    _install_arithmetic(builder, ti, handle, is_bf, f32)
    # a Python float meeting a bf16 tensor becomes a bf16 constant: the builder lacks it
    builder.get_bf16 = lambda self, value: handle(to_bf16(np.array([value], np.float32)), bf16)
    _install_casts(builder, ti, tl, is_bf, f32)
    _install_reductions(ti, tl, is_bf)
    builder._ratchet_bf16 = True


def _install_arithmetic(builder, ti, handle, is_bf, f32) -> None:
    """Element-wise operations and ``tl.dot`` of bf16 operands, in float32, rounded back."""

    def back(out: np.ndarray, like: Any) -> np.ndarray:
        """``out`` as ``like``'s type stores it: bf16 patterns when ``like`` is bf16."""
        return to_bf16(out) if is_bf(like) and np.asarray(out).dtype.kind == "f" else out

    def wrap(original, compute):
        def patched(self, *args, **kwargs):
            if not any(is_bf(a) for a in args if isinstance(a, handle)):
                return original(self, *args, **kwargs)
            return compute(self, *args, **kwargs)

        return patched

    builder.binary_op = wrap(
        builder.binary_op,
        lambda self, lhs, rhs, op: handle(back(op(f32(lhs), f32(rhs)), lhs), lhs.dtype.scalar),
    )
    builder.unary_op = wrap(
        builder.unary_op, lambda self, arg, op: handle(back(op(f32(arg)), arg), arg.dtype.scalar)
    )
    builder.ternary_op = wrap(
        builder.ternary_op,
        lambda self, a, b, c, op: handle(back(op(f32(a), f32(b), f32(c)), c), c.dtype.scalar),
    )
    builder.create_fma = wrap(
        builder.create_fma,
        lambda self, x, y, z: handle(back(f32(x) * f32(y) + f32(z), z), z.dtype.scalar),
    )
    builder.create_rsqrt = wrap(
        builder.create_rsqrt,
        lambda self, arg: handle(back(1 / np.sqrt(f32(arg)), arg), arg.dtype.scalar),
    )
    builder.create_erf = wrap(
        builder.create_erf,
        lambda self, arg: handle(back(ti.np_erf_fp32(f32(arg)), arg), arg.dtype.scalar),
    )

    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = np.matmul(f32(a), f32(b), dtype=np.float32) + f32(d)
        return handle(back(out, d) if is_bf(d) else out.astype(d.data.dtype), d.dtype.scalar)

    builder.create_dot = wrap(builder.create_dot, dot)


def _install_casts(builder, ti, tl, is_bf, f32) -> None:
    """Casts from bf16 decode the values; casts to bf16 round to nearest even (toward zero
    when the kernel asks for it)."""
    cast_impl, fp_to_fp = builder.cast_impl, builder.create_fp_to_fp

    def convert(src, dst_type, rtz: bool = False):
        dst = dst_type.scalar
        if dst == tl.bfloat16:
            x = np.asarray(f32(src), dtype=np.float32)
            data = (x.view(np.uint32) >> 16).astype(np.uint16) if rtz else to_bf16(x)
            return ti.TensorHandle(data, dst)
        return ti.TensorHandle(f32(src).astype(ti._get_np_dtype(dst)), dst)

    def patched_cast(self, src, dst_type):
        if is_bf(src) or dst_type.scalar == tl.bfloat16:
            return convert(src, dst_type)
        return cast_impl(self, src, dst_type)

    def patched_fp_to_fp(self, src, dst_type, rounding_mode):
        wide = (tl.float16, tl.float32, tl.float64, tl.bfloat16)
        if (
            (is_bf(src) or dst_type.scalar == tl.bfloat16)
            and src.dtype.scalar in wide
            and (dst_type.scalar in wide)
        ):
            return convert(src, dst_type, rtz=rounding_mode == ti._ir.ROUNDING_MODE.RTZ)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    builder.cast_impl = patched_cast  # the create_*_to_* casts call it by name
    builder.create_fp_to_fp = patched_fp_to_fp


def _install_reductions(ti, tl, is_bf) -> None:
    """``tl.sum``, ``tl.max``/``tl.min`` (and their arg- forms) and cumulative sums and
    products of bf16 tensors, in float32, results rounded back to bf16."""
    reduce_ops, scan_ops = ti.ReduceOps, ti.ScanOps

    def as_f32(t):
        return tl.core.tensor(ti.TensorHandle(to_f32(t.handle.data), tl.float32), _retyped(t.type))

    def as_bf16(t):
        data = to_bf16(t.handle.data)
        return tl.core.tensor(ti.TensorHandle(data, tl.bfloat16), _retyped(t.type, tl.bfloat16))

    def _retyped(ty, scalar=tl.float32):
        return tl.block_type(scalar, ty.shape) if isinstance(ty, tl.block_type) else scalar

    orig_sum, orig_min_max = reduce_ops.sum, reduce_ops.min_max
    orig_cumsum, orig_cumprod = scan_ops.cumsum, scan_ops.cumprod

    def sum_(self, input):
        if not is_bf(input.handle):
            return orig_sum(self, input)
        return as_bf16(orig_sum(self, as_f32(input)))

    def min_max(self, input, val_reduce_op, idx_reduce_op=None):
        x = input[0] if isinstance(input, tuple) else input
        if not is_bf(x.handle):
            return orig_min_max(self, input, val_reduce_op, idx_reduce_op)
        out = orig_min_max(self, as_f32(x), val_reduce_op, idx_reduce_op)
        if val_reduce_op is None:
            return out
        return (as_bf16(out[0]), out[1]) if idx_reduce_op else as_bf16(out)

    def scan(orig):
        def run(self, input):
            if not is_bf(input.handle):
                return orig(self, input)
            return [as_bf16(t) for t in orig(self, as_f32(input))]

        return run

    reduce_ops.sum, reduce_ops.min_max = sum_, min_max
    scan_ops.cumsum, scan_ops.cumprod = scan(orig_cumsum), scan(orig_cumprod)
