"""Launch a compiled Triton kernel without Triton's per-call binding.

``fn[grid](*args, **kwargs)`` binds, specializes and keys every argument on each call: tens of
microseconds of host time, as long as a small GEMM runs on the GPU. The first call of each
operand signature (dtypes, addresses modulo 16 and device of the call's tensors) goes through
it; the later ones go straight to the compiled kernel with the arguments Triton bound then, the
call's tensors put in. Everything else in ``args`` must be fixed for the runner's owner (a
launch plan: one problem geometry). A Triton whose internals this cannot bind keeps
``fn[grid]``.
"""

from __future__ import annotations

from typing import Any

import torch


def launch(
    fn: Any, runners: dict, grid: tuple[int], args: tuple, kwargs: dict[str, Any], tensors: int
) -> None:
    """Launch ``fn`` on ``grid``; ``args[:tensors]`` are the call's tensors, the rest of
    ``args`` and ``kwargs`` are fixed for ``runners`` (the owner's cache)."""
    key = tuple((t.dtype, t.data_ptr() % 16) for t in args[:tensors]) + (args[0].device.index,)
    runner = runners.get(key)
    if runner:
        kernel, bound = runner
        kernel[(grid[0], 1, 1)](*args[:tensors], *bound[tensors:])
        return
    kernel = fn[grid](*args, **kwargs)
    if runner is None:
        runners[key] = _bound(fn, kernel, args, kwargs)


def _bound(fn: Any, kernel: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[Any, tuple] | bool:
    """(compiled kernel, Triton's bound arguments of this call, in the signature's order), or
    False where this Triton's launch internals differ."""
    try:
        kernel = kernel.result() if hasattr(kernel, "result") else kernel
        binder = fn.device_caches[torch.cuda.current_device()][4]
        bound = tuple(binder(*args, **kwargs)[0].values())
        kernel.__getitem__  # noqa: B018 - the compiled kernel's runner
    except Exception:  # noqa: BLE001 - any other Triton: its own launch path
        return False
    return kernel, bound
