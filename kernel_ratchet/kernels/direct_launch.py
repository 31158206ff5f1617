"""Launch a Triton kernel through its compiled launcher, without Triton's per-call binding.

``fn[grid](*args, **kwargs)`` binds every argument to the signature, specializes each one
(dtype, 16-byte alignment, integer divisibility), builds a cache key from them and looks the
compiled kernel up, on every call. On an H200 host (torch 2.11, triton 3.6) that costs about
25-30 us of CPU time for a launch of the dense GEMM (20 arguments, 17 constexprs): 37-47 us per
launch against 15.5 us through the compiled kernel's own launcher. Kernels of 5-50 us of GPU
work (decode rows, small outputs) are bound by that host time in an eager step.

:class:`DirectLauncher` keeps, per call signature, the compiled kernel and the bound argument
list that the first (ordinary) launch produced, and later launches only put the call's tensors
into that list. The key of a call holds everything Triton specializes on except the tensors'
data: each tensor's dtype and whether its address is 16-byte aligned, every other argument's
value (floats only by type, as Triton does not specialize them), the current device and
Triton's debug and instrumentation options. A call whose arguments it cannot key (a type it
does not know), a JIT function with pre-run hooks and the interpreter take the ordinary path.
Launch hooks (profilers) still run: the compiled kernel's runner calls them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernel_ratchet.kernels.quant.launch import interpreter_mode

#: Distinct call signatures kept per kernel; the cache is emptied when it is full.
MAX_ENTRIES = 512
_PLAIN = (int, bool, str, type(None), torch.dtype)


@dataclass(frozen=True)
class _Entry:
    """A compiled kernel and its bound arguments: ``slots`` are the positions of the values a
    call supplies (``(position in vals, index in args)`` or ``(position, kwarg name)``)."""

    kernel: Any
    vals: tuple[Any, ...]
    slots: tuple[tuple[int, int | str], ...]


def current_device() -> int:
    """The current CUDA device's index (the device Triton launches on)."""
    return torch.cuda.current_device()


def _arg_key(value: Any) -> Any:
    """What Triton's specialization of one argument depends on, or raise TypeError."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.data_ptr() % 16 == 0)
    if isinstance(value, float):
        return float
    if isinstance(value, _PLAIN):
        return (type(value), value)
    raise TypeError(type(value).__name__)


def _triton_options() -> tuple[Any, ...]:
    """Triton settings that change what a launch compiles to."""
    from triton import knobs

    return (knobs.runtime.debug, knobs.compilation.instrumentation_mode)


class DirectLauncher:
    """``launcher(grid, args, kwargs)`` does what ``fn[grid](*args, **kwargs)`` does, with the
    binding done once per call signature (see the module docstring)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._cache: dict[Any, _Entry | None] = {}
        self.hits = 0

    def __call__(self, grid: Sequence[int], args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        key = self._key(args, kwargs)
        entry = self._cache.get(key) if key is not None else None
        if entry is None:
            kernel = self.fn[tuple(grid)](*args, **kwargs)
            kernel = kernel.result() if hasattr(kernel, "result") else kernel
            if key is not None and key not in self._cache:
                self._remember(key, kernel, args, kwargs)
            return
        vals = list(entry.vals)
        for pos, src in entry.slots:
            vals[pos] = kwargs[src] if isinstance(src, str) else args[src]
        g = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)
        entry.kernel[g](*vals)
        self.hits += 1

    def _key(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if interpreter_mode() or getattr(self.fn, "pre_run_hooks", None):
            return None
        try:
            arg_keys = tuple(_arg_key(v) for v in args)
            kw_keys = tuple((k, _arg_key(v)) for k, v in kwargs.items())
        except TypeError:
            return None
        return (current_device(), _triton_options(), arg_keys, kw_keys)

    def _remember(self, key: Any, kernel: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Bind the call once as Triton does and note where its per-call values go; a kernel
        this cannot bind is launched the ordinary way from then on (``None``)."""
        if len(self._cache) >= MAX_ENTRIES:
            self._cache.clear()
        try:
            bound = self._bind(args, kwargs)
        except Exception:  # noqa: BLE001 - a Triton without these internals: ordinary launches
            self._cache[key] = None
            return
        names = list(bound)
        slots: list[tuple[int, int | str]] = []
        for i, value in enumerate(args):
            if isinstance(value, torch.Tensor | float):
                slots.append((names.index(self.fn.arg_names[i]), i))
        for name, value in kwargs.items():
            if isinstance(value, torch.Tensor | float) and name in bound:
                slots.append((names.index(name), name))
        self._cache[key] = _Entry(kernel, tuple(bound.values()), tuple(slots))

    def _bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Triton's own binding of the call: every parameter, in the signature's order."""
        binder = self.fn.device_caches[current_device()][4]
        bound, _specialization, _options = binder(*args, **kwargs)
        return dict(bound)
