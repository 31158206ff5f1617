"""Direct launches of a Gluon kernel whose operands are host-side TMA descriptors.

Triton binds a kernel's arguments on every ``fn[grid](...)`` call and, for each host-side tensor
descriptor, encodes a TMA descriptor (``cuTensorMapEncodeTiled``, about 2 µs of host time
each): a call of a warp-specialized GEMM costs tens of microseconds of host time that way, as
long as a mid-sized GEMM takes on the GPU. :func:`launch` takes the call's tensors instead of
descriptors. The first call of a key goes through Triton, with descriptors built from the
tensors; later calls of the key go to the compiled kernel's C launcher
(:class:`.fast_launch.Direct`) with each TMA operand's descriptor from an :class:`Encoder`.

An encoding is a function of the tensor's address, shape and strides and of the compiled block
and swizzle alone, so an :class:`Encoder` keeps each one for the next tensor with the same
three: what it passes is what a new encode would give, whichever tensor it came from. While a
launch hook is installed (a profiler's), Triton's own launch runs, with descriptor stand-ins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton

from kernel_ratchet.kernels.gemm import fast_launch, launch_scratch

#: Encodings an :class:`Encoder` keeps; at the limit it starts over (ever-new addresses, as of
#: outputs allocated outside the caching allocator, must not grow it without bound).
KEPT = 256
#: Runners a launcher's table keeps; at the limit it starts over (ever-new geometries).
RUNNERS = 256


def launch(
    fn: Any,
    runners: dict | None,
    grid: tuple[int],
    tensors: tuple,
    blocks: Sequence[tuple | None],
    rest: tuple,
    kwargs: dict[str, Any],
    key: tuple,
) -> None:
    """Launch ``fn(*tensors, *rest, **kwargs)`` on ``grid``, each tensor whose entry of
    ``blocks`` is ``(block_shape, layout)`` passed as a host-side TMA descriptor, the others
    as pointers. ``key`` must hold everything of the call that ``rest``, ``kwargs`` and the
    compiled kernel depend on (dtypes, alignments, sizes, strides, the configuration):
    ``runners`` (the launcher's table) keeps one runner per key; None: Triton's launch every
    call."""
    runner = runners.get(key) if runners is not None else None
    if runner:
        runner(grid[0], tensors)
        return
    descriptors = tuple(described(t, b) for t, b in zip(tensors, blocks, strict=True))
    kernel = fn[grid](*descriptors, *rest, **kwargs)
    if runners is not None and runner is None:
        if len(runners) >= RUNNERS:
            runners.clear()
        runners[key] = _runner(fn, kernel, (*descriptors, *rest), kwargs, len(tensors))


def described(t: torch.Tensor, block: tuple | None) -> Any:
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    return t if block is None else TensorDescriptor.from_tensor(t, *block)


def _runner(fn: Any, kernel: Any, args: tuple, kwargs: dict[str, Any], tensors: int) -> Any:
    """A :class:`Runner` of the call's compiled kernel, or False where this Triton's launch
    internals differ (its own launch path then serves every call)."""
    direct = fast_launch._bound(fn, kernel, args, kwargs, tensors)
    if not direct:
        return False
    try:
        raw, encoders = _descriptor_launch(direct.kernel.run.launch, tensors)
    except TypeError:
        return False
    direct.c_launch = raw
    return Runner(direct, encoders)


class Runner:
    """A :class:`.fast_launch.Direct` whose C launcher takes each TMA operand as its encoded
    descriptor, shape and strides (what Triton's launcher passes), from the call's tensors."""

    __slots__ = ("direct", "encoders")

    def __init__(self, direct: fast_launch.Direct, encoders: tuple) -> None:
        self.direct, self.encoders = direct, encoders

    def __call__(self, grid: int, tensors: tuple) -> None:
        if launch_scratch.hooked():
            triton.set_allocator(launch_scratch.allocate)
            pairs = zip(self.encoders, tensors, strict=True)
            stand_ins = [t if e is None else Operand(t) for e, t in pairs]
            self.direct.kernel[(grid, 1, 1)](*stand_ins, *self.direct.tail)
            return
        args = [
            x
            for encode, t in zip(self.encoders, tensors, strict=True)
            for x in ((t,) if encode is None else encode(t))
        ]
        self.direct(grid, args)


class Operand:
    """What Triton's launcher reads of a host-side tensor descriptor (its tensor, shape,
    strides and padding; the block shape and swizzle are compiled in), without
    ``TensorDescriptor``'s checks (about 4 µs of host time each): a runner serves one key,
    whose first call built checked descriptors and whose geometry every later call shares."""

    __slots__ = ("base", "shape", "strides", "padding")

    def __init__(self, t: torch.Tensor) -> None:
        self.base, self.shape, self.strides, self.padding = t, t.shape, t.stride(), "zero"


class Encoder:
    """One tensor-descriptor argument of a compiled kernel: the arguments Triton's launcher
    passes for a tensor (the encoded descriptor, the shape, the strides), the encoding kept per
    (address, shape, strides). ``meta``: the kernel's metadata of that argument (swizzle,
    element size and type, block shape); ``host_type``: Triton's map of the device's element
    type numbers to the driver's."""

    __slots__ = ("fixed", "kept")

    def __init__(self, meta: dict, host_type: dict[int, int]) -> None:
        if meta.get("fp4_padded"):
            raise TypeError("a padded FP4 descriptor: Triton's launcher encodes it")
        self.fixed = (
            meta["swizzle"], meta["elem_size"], host_type[meta["elem_type"]], meta["block_size"]
        )  # fmt: skip
        self.kept: dict[tuple, Any] = {}

    def __call__(self, t: torch.Tensor) -> tuple:
        shape, strides = t.shape, t.stride()
        where = (t.data_ptr(), shape, strides)
        encoded = self.kept.get(where)
        if encoded is None:
            if len(self.kept) >= KEPT:
                self.kept.clear()
            encoded = triton.runtime.driver.active.utils.fill_tma_descriptor(
                where[0], *self.fixed, shape, strides, 0
            )  # 0: zero padding, the only one these launches take
            self.kept[where] = encoded
        return (encoded, *shape, *strides)


def _descriptor_launch(launch: Any, tensors: int) -> tuple[Any, tuple[Encoder | None, ...]]:
    """The C launcher under Triton's wrapper that encodes a kernel's tensor descriptors, and
    per call tensor an :class:`Encoder` (a descriptor) or None (a pointer). TypeError where
    ``launch`` is not that wrapper, or a descriptor is not among the call's tensors."""
    code, cells = getattr(launch, "__code__", None), getattr(launch, "__closure__", None)
    if code is None or not cells:
        raise TypeError("a launcher without tensor descriptors")
    bound = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=True))
    keys = ("launcher", "tensordesc_indices", "tensordesc_meta")
    raw, where, metas = (bound.get(k) for k in keys)
    if raw is None or not where or not metas or len(metas) != len(where):
        raise TypeError("not Triton's tensor-descriptor launcher")
    if not set(where) <= set(range(tensors)) or any(m is None for m in metas):
        raise TypeError("tensor descriptors outside the call's tensors, or not TMA ones")
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

    by_index = dict(zip(sorted(where), metas, strict=True))
    encoders = tuple(
        Encoder(by_index[i], TMA_DTYPE_DEVICE_TO_HOST) if i in by_index else None
        for i in range(tensors)
    )
    return raw, encoders
