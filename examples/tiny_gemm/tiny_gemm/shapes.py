"""Shape sets of the tiny GEMM (sizes the interpreter runs in well under a second)."""

from __future__ import annotations

from kernel_ratchet.harness.adapter import Shape

_DIMS = [(32, 32, 32), (48, 40, 32), (33, 47, 40), (16, 64, 48)]

#: The default target_shapes of the example campaign; includes odd, non-power-of-two sizes.
TINY = [Shape(label=f"m{m}_n{n}_k{k}", M=m, N=n, K=k) for m, n, k in _DIMS]
