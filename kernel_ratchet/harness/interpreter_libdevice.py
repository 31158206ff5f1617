"""libdevice math in the Triton interpreter (CPU rehearsals).

Kernels reach CUDA's libdevice through ``triton.language.extra.libdevice`` (``tanh`` for a
tanh-approximated GELU, ``erf``, ``pow``, ``rsqrt``, ...). Those functions are stubs that
the compiler resolves for its backend; the interpreter runs them as Python and gets None, so
a correct kernel fails only on the CPU ("unsupported operand type(s) for +: 'int' and
'NoneType'"). :func:`install` gives the stubs of the common functions bodies computed with
numpy on the interpreter's tensors: float32 and float64 as they are, float16 and bfloat16 in
float32 and rounded back. It replaces them in the libdevice modules and in every module
already imported that bound one by name (``from ...libdevice import tanh``). A function
without a body here still returns None: the kernel then fails on the CPU, as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_ratchet.harness.interpreter_bf16 import to_bf16, to_f32

#: libdevice name -> numpy function of the values (same dtype out, unless a predicate).
_VALUES: dict[str, Callable[..., Any]] = {
    "abs": np.abs,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "atanh": np.arctanh,
    "cbrt": np.cbrt,
    "ceil": np.ceil,
    "copysign": np.copysign,
    "cos": np.cos,
    "cosh": np.cosh,
    "exp": np.exp,
    "exp10": lambda x: np.power(10.0, x),
    "exp2": np.exp2,
    "expm1": np.expm1,
    "fast_expf": np.exp,
    "fast_logf": np.log,
    "fast_tanhf": np.tanh,
    "fdim": lambda x, y: np.maximum(x - y, 0),
    "floor": np.floor,
    "fma": lambda x, y, z: x * y + z,
    "fmod": np.fmod,
    "hypot": np.hypot,
    "log": np.log,
    "log10": np.log10,
    "log1p": np.log1p,
    "log2": np.log2,
    "nearbyint": np.rint,
    "pow": np.power,
    "rint": np.rint,
    "round": lambda x: np.trunc(x + np.copysign(0.5, x)),
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sin": np.sin,
    "sinh": np.sinh,
    "sqrt": np.sqrt,
    "tan": np.tan,
    "tanh": np.tanh,
    "trunc": np.trunc,
    "div_rn": np.divide,
}
#: Predicates: a boolean tensor out.
_PREDICATES: dict[str, Callable[..., Any]] = {
    "isnan": np.isnan,
    "isinf": np.isinf,
    "signbit": np.signbit,
    "finitef": np.isfinite,
    "isfinited": np.isfinite,
}
_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")


def _erf(x: np.ndarray) -> np.ndarray:
    import torch  # numpy has no erf; torch is here wherever the harness is

    return torch.erf(torch.from_numpy(np.ascontiguousarray(x))).numpy()


def _body(name: str, fn: Callable[..., Any], predicate: bool) -> Callable[..., Any]:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def call(*args: Any, **_: Any) -> Any:
        like = next((a for a in args if isinstance(a, tl.tensor)), None)
        if like is None:  # constants only: a plain number, as Python would compute it
            return fn(*(a.value if isinstance(a, tl.constexpr) else a for a in args))
        scalar = _scalar(like)
        values = [_values(a) for a in args]
        out = np.asarray(fn(*values))
        if predicate:
            ty = tl.int1 if not like.type.is_block() else tl.block_type(tl.int1, like.shape)
            return tl.tensor(TensorHandle(out.astype(np.bool_), tl.int1), ty)
        data = to_bf16(out) if scalar == tl.bfloat16 else out.astype(like.handle.data.dtype)
        return tl.tensor(TensorHandle(data, scalar), like.type)

    call.__name__ = call.__qualname__ = name
    call.ratchet_interpreted = True  # type: ignore[attr-defined]
    return call


def _scalar(t: Any) -> Any:
    """The element type of an interpreter tensor (a block's or a scalar's)."""
    return getattr(t.dtype, "scalar", t.dtype)


def _values(arg: Any) -> Any:
    """An argument's values as numpy: a tensor's (bfloat16 and float16 in float32), a
    constant's, a number as it is."""
    import triton.language as tl

    if isinstance(arg, tl.constexpr):
        arg = arg.value
    if not isinstance(arg, tl.tensor):
        return arg
    data, scalar = arg.handle.data, _scalar(arg)
    if scalar == tl.bfloat16:
        return to_f32(data)
    if scalar == tl.float16:
        return data.astype(np.float32)
    return data


def install() -> None:
    """Give the libdevice stubs numpy bodies, in the libdevice modules and wherever a module
    already bound one (idempotent)."""
    import importlib

    bodies: dict[str, Callable[..., Any]] = {}
    for name, fn in _VALUES.items():
        bodies[name] = _body(name, fn, predicate=False)
    bodies["erf"] = _body("erf", _erf, predicate=False)
    for name, fn in _PREDICATES.items():
        bodies[name] = _body(name, fn, predicate=True)
    stubs: dict[int, Callable[..., Any]] = {}
    for mod_name in _MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        for name, body in bodies.items():
            old = getattr(mod, name, None)
            if old is None or getattr(old, "ratchet_interpreted", False):
                continue
            stubs[id(old)] = body
            setattr(mod, name, body)
    if not stubs:
        return
    for mod in list(sys.modules.values()):  # kernels imported before: `from ... import tanh`
        try:
            d = vars(mod)
        except Exception:  # noqa: BLE001 - a lazy or odd module: it holds no kernel
            continue
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            body = stubs.get(id(value)) if callable(value) else None
            if body is not None:
                d[key] = body
