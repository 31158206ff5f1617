"""Which Triton kernels an op really launches on a shape.

A kernel file often holds more kernels than an op calls on a given machine and shape (a
Blackwell-only tiled variant, a fused variant another op uses): moving the knobs of a kernel
that never runs costs a round and measures nothing. :func:`recording` notes the name of every
``@triton.jit`` function launched while it is open (compiled or in the interpreter, autotuned
or not); the harness records them for each shape it checks (``launches.json`` beside its CSV),
and the search leaves out the knobs of kernels the BASELINE never launched. Beside the names it
keeps each launch's scalar arguments (constexprs, flags, sizes: :func:`arguments`;
``launch_args.json``), so a round can say which of the code it changed no measured launch
reaches (:mod:`kernel_ratchet.guard.reach`).
"""

from __future__ import annotations

import functools
import inspect
import json
import numbers
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

#: The file beside a harness CSV that names the kernels launched, by shape.
FILE = "launches.json"
#: The file beside it with each launch's scalar arguments, by shape and kernel.
ARGS_FILE = "launch_args.json"
#: At most this many distinct argument sets are kept per kernel (an op that launches a kernel
#: with a new size on every call would otherwise grow the file without bound).
MAX_ARG_SETS = 64

Scalar = bool | int | float | str | None


class Launched(set):
    """The names of the kernels launched (a set), and ``args``: per kernel, the distinct sets of
    scalar arguments it was launched with, as sorted ``(name, value)`` tuples."""

    def __init__(self) -> None:
        super().__init__()
        self.args: dict[str, set[tuple[tuple[str, Scalar], ...]]] = {}

    def add_launch(self, name: str, values: dict[str, Scalar]) -> None:
        self.add(name)
        kept = self.args.setdefault(name, set())
        if len(kept) < MAX_ARG_SETS:
            kept.add(tuple(sorted(values.items())))

    def arg_sets(self) -> dict[str, list[dict[str, Scalar]]]:
        """Per kernel, its argument sets as dicts (sorted, for a stable file)."""
        return {k: [dict(t) for t in sorted(v, key=repr)] for k, v in sorted(self.args.items())}


def _scalar(value: Any) -> tuple[bool, Scalar]:
    """``(True, value)`` for what a kernel can branch on at compile time and JSON can hold: a
    bool, int, float, str or None, a ``tl.constexpr`` of one, a dtype by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True, value
    if isinstance(value, numbers.Integral):  # a numpy integer
        return True, int(value)
    inner = getattr(value, "value", value)  # tl.constexpr
    if inner is not value and (inner is None or isinstance(inner, (bool, int, float, str))):
        return True, inner
    kind = type(value).__name__
    if kind == "dtype" or kind.endswith("_dtype"):  # torch.dtype, tl.dtype: named
        return True, str(value)
    return False, None


@functools.lru_cache(maxsize=512)
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)


def arguments(fn: Any, args: tuple, kwargs: dict) -> dict[str, Scalar]:
    """The scalar arguments of one launch of the Python function ``fn``, by parameter name, its
    defaults included; tensors, pointers and anything else left out. Launch options (grid,
    ``num_warps``, ...) are not parameters and are not kept; an autotuner's trial launches
    are launches too."""
    try:
        sig = _signature(fn)
        known = {k: v for k, v in kwargs.items() if k in sig.parameters}
        bound = sig.bind_partial(*args, **known)
        bound.apply_defaults()
    except (TypeError, ValueError):
        return {}
    out: dict[str, Scalar] = {}
    for name, value in bound.arguments.items():
        ok, v = _scalar(value)
        if ok:
            out[name] = v
    return out


def _launcher_classes() -> list[type]:
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # no Triton: nothing is launched through it
        return []
    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


def _compiled_launch(kernel: Any, args: tuple) -> tuple[str, dict[str, Scalar]]:
    """(name, scalar arguments) of a launch through a compiled kernel's runner
    (``compiled[grid](*args)``, every parameter in order), constexprs from its source."""
    src = getattr(kernel, "src", None)
    jit = getattr(src, "fn", None)
    values = arguments(getattr(jit, "fn", None), args, {}) if jit is not None else {}
    names = list(getattr(jit, "arg_names", ()) or ())
    for path, value in (getattr(src, "constants", None) or {}).items():
        ok, v = _scalar(value)
        if ok and isinstance(path, tuple) and len(path) == 1 and path[0] < len(names):
            values[names[path[0]]] = v
    return str(getattr(kernel, "name", "") or repr(kernel)), values


@contextmanager
def _patched(cls: type, attr: str, make: Any) -> Iterator[None]:
    """``cls.attr`` replaced by ``make(original)`` while the block runs (untouched where the
    class does not define it)."""
    original = cls.__dict__.get(attr)
    if original is not None:
        setattr(cls, attr, make(original))
    try:
        yield
    finally:
        if original is not None:
            setattr(cls, attr, original)


def _compiled_classes() -> list[type]:
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return []
    return [CompiledKernel]


def _enter_hooks() -> Any:
    """Triton's chain of launch-enter hooks, where it has one."""
    try:
        from triton import knobs
    except ImportError:
        return None
    chain = getattr(getattr(knobs, "runtime", None), "launch_enter_hook", None)
    return chain if hasattr(chain, "add") and hasattr(chain, "remove") else None


@contextmanager
def recording() -> Iterator[Launched]:
    """The names of the Triton kernels launched while the block runs (filled as they are), and
    the scalar arguments of each launch (:class:`Launched`).

    Seen: launches through ``kernel[grid](...)`` (compiled, interpreted, autotuned) and through
    a compiled kernel's runner (``compiled[grid](...)``). A launch hook stays installed while
    the block runs, so launchers that call Triton's C launcher themselves except while a hook
    is installed (a profiler's) launch through Triton; a launch seen by the hook alone is
    recorded by name with no arguments (nothing it runs is then called unreached)."""
    names = Launched()

    def jit_run(original: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            fn = getattr(self, "fn", None)
            name = getattr(fn, "__name__", "") or repr(self)
            names.add_launch(name, arguments(fn, args, kwargs) if fn is not None else {})
            return original(self, *args, **kwargs)

        return run

    def compiled_getitem(original: Any) -> Any:
        def getitem(self: Any, grid: Any) -> Any:
            runner = original(self, grid)

            def recorded(*args: Any, **kwargs: Any) -> Any:
                names.add_launch(*_compiled_launch(self, args))
                return runner(*args, **kwargs)

            return recorded

        return getitem

    def hook(metadata: Any) -> None:
        name = (getattr(metadata, "data", None) or {}).get("name")
        if isinstance(name, str) and name not in names.args:
            names.add_launch(name, {})

    chain = _enter_hooks()
    with ExitStack() as stack:
        for cls in _launcher_classes():
            stack.enter_context(_patched(cls, "run", jit_run))
        for cls in _compiled_classes():
            stack.enter_context(_patched(cls, "__getitem__", compiled_getitem))
        if chain is not None:
            chain.add(hook)
            stack.callback(chain.remove, hook)
        yield names


def write(path: Path, by_shape: dict[str, Iterable[str]]) -> None:
    """Write ``{shape label: [kernel names]}``."""
    data = {label: sorted(set(names)) for label, names in by_shape.items()}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def read(path: Path) -> set[str] | None:
    """Every kernel launched on any shape, or None when nothing was recorded (no file, an
    unreadable one, or an op that launched no Triton kernel)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    names = {n for v in data.values() if isinstance(v, list) for n in v if isinstance(n, str)}
    return names or None


def write_args(path: Path, by_shape: dict[str, dict[str, list[dict[str, Scalar]]]]) -> None:
    """Write ``{shape label: {kernel: [its argument sets]}}``."""
    path.write_text(json.dumps(by_shape, indent=1, sort_keys=True, default=str) + "\n")


def read_args(*paths: Path) -> dict[str, list[dict[str, Scalar]]] | None:
    """Per kernel, every argument set it was launched with on any shape of any of ``paths``;
    None when none of them recorded anything (no file, an unreadable one)."""
    out: dict[str, list[dict[str, Scalar]]] | None = None
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        out = out if out is not None else {}
        for kernels in data.values():
            for name, sets in (kernels or {}).items() if isinstance(kernels, dict) else ():
                kept = out.setdefault(name, [])
                kept.extend(s for s in sets if isinstance(s, dict) and s not in kept)
    return out
