"""A kernel that calls libdevice functions, imported (binding them by name) before any test
of the interpreter shim runs."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.libdevice import erf, isnan, pow, tanh


@triton.jit
def gelu_like(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = 0.5 * x * (1 + tanh(0.79788456 * (x + 0.044715 * pow(x, 3.0)))) + erf(x)
    y = tl.where(isnan(x), 0.0, y)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
