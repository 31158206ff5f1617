"""Census machinery shared by the kernel packs' structural census tools.

A census records what one call of an op launches and copies, without timing anything:

* every launch of the named ``@triton.jit`` functions (grid, constexpr arguments, the integer
  arguments and the specialization Triton derives from them), by standing in for the kernel
  object in its launcher's module while the call runs;
* every aten op that copies or fills a whole tensor (``COPY_OPS``) with the bytes it writes;
* every aten op that makes the host wait for device data (``SYNC_OPS``: ``.item()``,
  ``.tolist()``, ``nonzero`` ...).

``dry=True`` records without running a kernel (outputs are garbage). On meta tensors a dry call
allocates nothing, so full-size MoE layers take milliseconds on a CPU, and a host read of
device data cannot happen silently: it raises. :func:`host_us` times the host work of a call
with every launch skipped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that copy or fill a whole tensor (what a mask or a TMA descriptor could replace).
COPY_OPS = frozenset(
    {"clone", "copy_", "_to_copy", "constant_pad_nd", "contiguous", "zero_", "fill_", "zeros"}
)
#: aten ops that read device data on the host (a stream synchronization on a GPU).
SYNC_OPS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim"})
#: H200: 132 SMs.
H200_SMS = 132

#: (module, attribute) pairs: the kernels a census stands in for.
Patches = Sequence[tuple[object, str]]


@dataclass(frozen=True)
class Launch:
    """One kernel launch: which kernel, its grid, and the key Triton compiles it under."""

    kernel: str
    grid: tuple[int, ...]
    constexprs: tuple[tuple[str, object], ...]
    spec: tuple[object, ...]
    #: the integer arguments, in order (sizes and strides)
    ints: tuple[int, ...] = ()
    #: bytes of the tensor arguments (what a memory-bound pass reads and writes once)
    tensor_bytes: int = 0
    #: compile options passed with the launch (``num_warps``), not part of ``constexprs``
    options: tuple[tuple[str, object], ...] = ()

    def get(self, name: str) -> object:
        return dict(self.constexprs).get(name)

    @property
    def ctas(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n


def spec_of(args: tuple[object, ...]) -> tuple[object, ...]:
    """Triton's specialization of runtime arguments: integers by ``== 1`` and divisibility by
    16, pointers by 16-byte alignment. Distinct keys are distinct compiled kernels."""
    out: list[object] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(("ptr", str(a.dtype), a.data_ptr() % 16 == 0))
        elif isinstance(a, bool) or not isinstance(a, int):
            out.append(type(a).__name__)
        else:
            out.append(("int", a == 1, a % 16 == 0))
    return tuple(out)


@dataclass
class Census:
    """Launches, copies and host reads recorded inside :meth:`instrument`."""

    launches: list[Launch] = field(default_factory=list)
    copies: dict[str, int] = field(default_factory=dict)
    copy_bytes: int = 0
    syncs: dict[str, int] = field(default_factory=dict)
    #: set while a recorded kernel runs: the interpreter's own argument copies are not counted
    in_kernel: bool = False

    def of(self, *kernels: str) -> list[Launch]:
        return [x for x in self.launches if x.kernel in kernels]

    def variants(self) -> int:
        """Distinct (kernel, constexprs, specialization, options) keys: compiles on a cold
        cache."""
        return len({(x.kernel, x.constexprs, x.spec, x.options) for x in self.launches})

    @contextlib.contextmanager
    def instrument(
        self,
        patches: Patches,
        overrides: Sequence[tuple[object, str, object]] = (),
        *,
        dry: bool = False,
        count: bool = True,
    ) -> Iterator[Census]:
        """Stand in for each ``patches`` kernel and set each ``overrides`` attribute while the
        block runs; ``count=False`` records nothing (launches skipped when ``dry``)."""
        saved = [(mod, name, getattr(mod, name)) for mod, name, _ in overrides]
        saved += [(mod, name, getattr(mod, name)) for mod, name in patches]
        for mod, name, value in overrides:
            setattr(mod, name, value)
        for mod, name in patches:
            setattr(mod, name, _Recorder(name, getattr(mod, name), self, dry, count))
        try:
            with _CopyCounter(self) if count else contextlib.nullcontext():
                yield self
        finally:
            for mod, name, fn in reversed(saved):
                setattr(mod, name, fn)


class _Recorder:
    """Stands in for a ``@triton.jit`` function: ``kernel[grid](*args, **constexprs)``."""

    def __init__(self, name: str, fn: object, census: Census, dry: bool, count: bool) -> None:
        self.name, self.fn, self.census, self.dry, self.count = name, fn, census, dry, count
        self.__name__ = name

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        def run(*args: object, **kw: object) -> None:
            if self.count:
                const = tuple(sorted((k, v) for k, v in kw.items() if k != "num_warps"))
                opts = tuple((k, v) for k, v in kw.items() if k == "num_warps")
                ints = tuple(a for a in args if isinstance(a, int) and not isinstance(a, bool))
                nbytes = sum(
                    a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor)
                )
                launch = Launch(self.name, tuple(grid), const, spec_of(args), ints, nbytes, opts)
                self.census.launches.append(launch)
            if self.dry:
                return
            self.census.in_kernel = True
            try:
                self.fn[grid](*args, **kw)  # type: ignore[index]
            finally:
                self.census.in_kernel = False

        return run


class _CopyCounter(TorchDispatchMode):
    def __init__(self, census: Census) -> None:
        super().__init__()
        self.census = census

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in SYNC_OPS and not self.census.in_kernel:
            self.census.syncs[name] = self.census.syncs.get(name, 0) + 1
        out = func(*args, **(kwargs or {}))
        if name in COPY_OPS and not self.census.in_kernel:
            self.census.copies[name] = self.census.copies.get(name, 0) + 1
            if isinstance(out, torch.Tensor):
                self.census.copy_bytes += out.numel() * out.element_size()
        return out


def host_us(
    fn: Callable[[], object],
    patches: Patches,
    overrides: Sequence[tuple[object, str, object]] = (),
    *,
    calls: int = 20,
) -> float:
    """Microseconds of host work per call of ``fn`` with every kernel launch skipped: the
    launchers' Python, autograd, allocations and copies, not Triton's own launch path (on a
    GPU add its launch cost per recorded launch)."""
    with Census().instrument(patches, overrides, dry=True, count=False):
        fn()  # first call: imports, caches
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t) / calls * 1e6
