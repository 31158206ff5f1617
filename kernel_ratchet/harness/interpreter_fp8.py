"""FP8 casts that round as the GPU does in the Triton interpreter (CPU rehearsals).

The interpreter (triton 3.6) casts to fp8 by cutting the mantissa: the carry is lost in the
normal range (31.6 -> 16 in E4M3, not 32) and values below the smallest normal come out a
step off. The GPU's cast (``cvt.rn.satfinite``) rounds to nearest even and saturates at the
format's largest finite value. :func:`install` makes the interpreter's casts from fp32, fp16
and bf16 to E4M3 and E5M2 do the same, through torch's own fp8 cast of the clamped values
(NaN stays NaN).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _decode(handle: Any, tl: Any) -> np.ndarray:
    """float32 values of an interpreter tensor of fp32, fp16 or bf16."""
    data = np.asarray(handle.data)
    if handle.dtype.scalar == tl.bfloat16:
        return (data.astype(np.uint32) << 16).view(np.float32)
    return data.astype(np.float32)


def install() -> None:
    """Patch the interpreter's fp-to-fp cast (idempotent)."""
    import torch
    import triton.language as tl
    from triton.runtime import interpreter as ti

    builder = ti.InterpreterBuilder
    if getattr(builder, "_ratchet_fp8", False):
        return
    targets = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
    sources = (tl.float32, tl.float16, tl.bfloat16)
    original = builder.create_fp_to_fp

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        dst = targets.get(dst_type.scalar)
        if dst is None or src.dtype.scalar not in sources:
            return original(self, src, dst_type, rounding_mode)
        top = torch.finfo(dst).max
        values = torch.from_numpy(_decode(src, tl).copy()).clamp(-top, top)
        bits = values.to(dst).view(torch.uint8).numpy()
        return ti.TensorHandle(bits.reshape(np.shape(src.data)), dst_type.scalar)

    builder.create_fp_to_fp = create_fp_to_fp
    builder._ratchet_fp8 = True
