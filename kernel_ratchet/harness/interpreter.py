"""What the Triton interpreter (``TRITON_INTERPRET=1``, CPU rehearsals) cannot do alone.

* ``@triton.autotune`` benchmarks its configs through the active GPU driver, which the
  interpreter does not have (``0 active drivers``). :func:`install` gives the autotuner a
  benchmarker that times nothing, so the first config is taken: a rehearsal exercises the
  mechanics, and interpreter timings could not rank configs anyway.
* A Python ``float`` passed to a kernel stays a Python float in the interpreter, where the
  compiler makes it an fp32 scalar: ``eps.to(tl.float32)`` or ``tl.full(..., scale)`` then
  fail only on the CPU. :func:`install` hands such arguments to the kernel as fp32 scalars,
  as the compiler does (ints and tensors are already converted by the interpreter itself).
* bfloat16 arithmetic, reductions, ``tl.dot`` and casts compute on bit patterns
  (:mod:`.interpreter_bf16` makes them compute on the values).
* ``triton.language.extra.libdevice`` functions (``tanh``, ``erf``, ``pow``...) are stubs
  that return None (:mod:`.interpreter_libdevice` gives them numpy bodies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _no_bench(fn: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> Any:
    """Every config "takes" 0 ms: the autotuner keeps its first one."""
    return [0.0] * len(quantiles) if quantiles else 0.0


def _with_fp32_floats(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The interpreter's argument conversion, with a Python float made an fp32 scalar."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return tl.tensor(
                TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32
            )
        return convert(arg)

    cvt.fp32_floats = True  # type: ignore[attr-defined]
    return cvt


def install() -> None:
    """Make ``@triton.autotune``, float scalar arguments, bfloat16 and libdevice math work in
    the interpreter (idempotent)."""
    from triton.runtime import autotuner, interpreter

    from kernel_ratchet.harness import interpreter_bf16, interpreter_libdevice

    interpreter_bf16.install()
    interpreter_libdevice.install()

    autotuner.Autotuner.do_bench = property(lambda self: _no_bench)  # type: ignore[assignment]
    convert = getattr(interpreter, "_implicit_cvt", None)
    if convert is not None and not getattr(convert, "fp32_floats", False):
        interpreter._implicit_cvt = _with_fp32_floats(convert)
