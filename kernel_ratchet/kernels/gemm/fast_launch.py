"""Launch a compiled Triton kernel without Triton's per-call binding.

``fn[grid](*args, **kwargs)`` binds, specializes and keys every argument on each call: tens of
microseconds of host time, as long as a small GEMM runs on the GPU. The first call of each
operand signature (dtypes, addresses modulo 16 and device of the call's tensors) goes through
it; the later ones go straight to the compiled kernel's C launcher with the arguments Triton
bound then, the call's tensors put in (:class:`Direct`). Everything else in ``args`` must be
fixed for the runner's owner (a launch plan: one problem geometry). A Triton whose internals
this cannot bind keeps ``fn[grid]``; while a launch hook is installed (a profiler's), the
compiled kernel's own runner launches, which calls it.
"""

from __future__ import annotations

from typing import Any

import torch
import triton

from kernel_ratchet.kernels.gemm import launch_scratch


def launch(
    fn: Any,
    runners: dict,
    grid: tuple[int],
    args: tuple,
    kwargs: dict[str, Any],
    tensors: int,
    key: tuple | None = None,
) -> None:
    """Launch ``fn`` on ``grid``; ``args[:tensors]`` are the call's tensors (or host-side
    tensor descriptors, with the runner's ``key`` given), the rest of ``args`` and ``kwargs``
    are fixed for ``runners`` (the owner's cache)."""
    key = signature(args[:tensors]) if key is None else key
    runner = runners.get(key)
    if runner:
        runner(grid[0], args[:tensors])
        return
    kernel = fn[grid](*args, **kwargs)
    if runner is None:
        runners[key] = _bound(fn, kernel, args, kwargs, tensors)


def signature(tensors: tuple) -> tuple:
    """The key of a call's runner: each tensor's dtype and address modulo 16, the device."""
    return tuple((t.dtype, t.data_ptr() % 16) for t in tensors) + (tensors[0].device.index,)


class Direct:
    """A compiled kernel launched through its C launcher with its fixed arguments bound.

    Per call: the current device's current stream, the global scratch the kernel's on-device
    tensor descriptors live in (:mod:`.launch_scratch`), and the launch itself: no argument
    binding, no launch metadata, no allocator call outside graph capture.
    """

    __slots__ = ("kernel", "tail", "c_launch", "function", "packed", "coop", "pdl", "scratch")

    def __init__(self, kernel: Any, bound: tuple, tensors: int) -> None:
        run = kernel.run  # the CudaLauncher
        if run.profile_scratch_size or run.global_scratch_align > launch_scratch.ALIGN:
            raise TypeError("an instrumented kernel, or one whose scratch is aligned wider")
        self.kernel, self.tail = kernel, bound[tensors:]
        self.c_launch, self.function = run.launch, kernel.function
        self.packed = kernel.packed_metadata
        self.coop, self.pdl = run.launch_cooperative_grid, run.launch_pdl
        self.scratch = run.global_scratch_size * run.num_ctas

    def __call__(self, grid: int, tensors: tuple) -> None:
        if launch_scratch.hooked():
            triton.set_allocator(launch_scratch.allocate)
            self.kernel[(grid, 1, 1)](*tensors, *self.tail)
            return
        device, stream = launch_scratch.current()
        scratch = launch_scratch.get(device, stream, grid * self.scratch)
        self.c_launch(
            grid, 1, 1, stream, self.function, self.coop, self.pdl, scratch, None,
            self.packed, None, None, None, *tensors, *self.tail,
        )  # fmt: skip


def _bound(fn: Any, kernel: Any, args: tuple, kwargs: dict[str, Any], tensors: int) -> Any:
    """A :class:`Direct` of this call's compiled kernel with Triton's bound arguments (in the
    signature's order), or False where this Triton's launch internals differ."""
    try:
        kernel = kernel.result() if hasattr(kernel, "result") else kernel
        binder = fn.device_caches[torch.cuda.current_device()][4]
        bound = tuple(binder(*args, **kwargs)[0].values())
        return Direct(kernel, bound, tensors)
    except Exception:  # noqa: BLE001 - any other Triton: its own launch path
        return False
