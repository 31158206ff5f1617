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
* Casts to fp8 cut the mantissa instead of rounding to nearest even and saturating as the GPU
  does (:mod:`.interpreter_fp8`).
* ``triton.language.extra.libdevice`` functions (``tanh``, ``erf``, ``pow``...) are stubs
  that return None (:mod:`.interpreter_libdevice` gives them numpy bodies).
* A scalar used as an index (``range(0, K, BK)`` with a tensor ``K``) is ``int()`` of a
  one-element array, which numpy 2.4 refuses (:data:`NUMPY_SCALARS`; triton 3.6's
  interpreter and earlier): :func:`install` takes the element instead. A pytest a campaign
  starts calls it through :mod:`.interpreter_plugin`; a process that does not (a test run by
  hand, a command that is no pytest) still fails so, and :func:`hint` says what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: What numpy 2.4 and later raise where Triton's interpreter (triton 3.6 and earlier) converts
#: a one-element array to an int.
NUMPY_SCALARS = "only 0-dimensional arrays can be converted to Python scalars"


def hint(text: str) -> str:
    """What to do about a failure whose ``text`` is the interpreter's numpy conversion error;
    "" for any other."""
    if NUMPY_SCALARS not in text:
        return ""
    import numpy

    return (
        f"Triton's interpreter (TRITON_INTERPRET=1) converts scalars in a way numpy "
        f"{numpy.__version__} refuses: install numpy<2.4 (pip install 'numpy<2.4') or a "
        "triton whose interpreter supports it"
    )


def _element_index(patch: Callable[..., None]) -> Callable[..., None]:
    """The interpreter's tensor patching, with ``__index__`` reading the one element."""

    def patched(tensor: Any, scope: Any) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched.element_index = True  # type: ignore[attr-defined]
    patched.__wrapped__ = patch  # type: ignore[attr-defined]
    return patched


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
    """Make ``@triton.autotune``, float scalar arguments, scalar indices, bfloat16 and
    libdevice math work in the interpreter (idempotent)."""
    from triton.runtime import autotuner, interpreter

    from kernel_ratchet.harness import interpreter_bf16, interpreter_fp8, interpreter_libdevice

    interpreter_bf16.install()
    interpreter_fp8.install()
    interpreter_libdevice.install()

    autotuner.Autotuner.do_bench = property(lambda self: _no_bench)  # type: ignore[assignment]
    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is not None and not getattr(patch, "element_index", False):
        interpreter._patch_lang_tensor = _element_index(patch)
    convert = getattr(interpreter, "_implicit_cvt", None)
    if convert is not None and not getattr(convert, "fp32_floats", False):
        interpreter._implicit_cvt = _with_fp32_floats(convert)
