"""Structural census of one Linear call: what it launches, copies and compiles, per shape.

    python -m kernel_ratchet.kernels.gemm.census [--set odd|model|cpu] [--sms 132]

A GEMM that reaches a quarter of the vendor's speed on one shape and parity on another usually
does something structurally different there: a per-shape recompile, a whole-tensor copy, a
fallback from TMA to scalar loads, a grid that fills a fraction of the SMs. Those are visible
without a GPU. :class:`Census` records every launch of the dense GEMM kernel and of the FP8
quantization kernels (grid, constexpr arguments, the specialization Triton derives from the
integer and pointer arguments) and counts the copies PyTorch makes (``aten`` copy, clone, pad,
fill) while a call runs.

``dry=True`` records without running any kernel (outputs are garbage), so full-size shapes take
milliseconds on a CPU; it also makes the launcher decide as on a GPU with ``sms`` SMs (TMA
eligibility by alignment instead of the interpreter's pointer path). Without ``dry`` the kernels
run (in the interpreter on CPU tensors) and the numbers are the real path's.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.gemm.bench import SHAPE_SETS
from kernel_ratchet.kernels.gemm.fp8 import Fp8Recipe, gemm_fp8_backward, gemm_fp8_forward
from kernel_ratchet.kernels.quant import launch as qlaunch

#: aten ops that copy or fill a whole tensor (what a mask or a TMA descriptor could replace).
COPY_OPS = frozenset(
    {"clone", "copy_", "_to_copy", "constant_pad_nd", "contiguous", "zero_", "fill_", "zeros"}
)
#: H200: 132 SMs.
H200_SMS = 132
_QUANT_KERNELS = ("_amax_kernel", "_apply_scale_kernel", "_group_quant_kernel")


@dataclass(frozen=True)
class Launch:
    """One kernel launch: which kernel, its grid, and the key Triton compiles it under."""

    kernel: str
    grid: tuple[int, ...]
    constexprs: tuple[tuple[str, object], ...]
    spec: tuple[object, ...]

    def get(self, name: str) -> object:
        return dict(self.constexprs).get(name)

    @property
    def ctas(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n


def _spec_of(args: tuple[object, ...]) -> tuple[object, ...]:
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


def _strides_ok(spec: tuple[object, ...]) -> bool:
    """Every stride is 1 or known 16-divisible (elements)."""
    return all(s[1] or s[2] for s in spec)  # type: ignore[index]


@dataclass
class Census:
    """Launches and copies recorded inside :meth:`record`."""

    launches: list[Launch] = field(default_factory=list)
    copies: dict[str, int] = field(default_factory=dict)
    copy_bytes: int = 0
    #: set while a recorded kernel runs: the interpreter's own argument copies are not counted
    in_kernel: bool = False

    def gemms(self) -> list[Launch]:
        return [x for x in self.launches if x.kernel == "_gemm_kernel"]

    def quant_passes(self) -> int:
        return sum(x.kernel in _QUANT_KERNELS for x in self.launches)

    def variants(self) -> int:
        """Distinct (kernel, constexprs, specialization) keys: compiles on a cold cache."""
        return len({(x.kernel, x.constexprs, x.spec) for x in self.launches})

    def unaligned_gemms(self) -> int:
        """GEMM launches on the pointer path with a stride Triton cannot prove 16-divisible
        (their loads are not vectorized): the strides are the integer arguments 9-12."""
        return sum(not x.get("USE_TMA") and not _strides_ok(x.spec[8:12]) for x in self.gemms())

    @contextlib.contextmanager
    def record(self, *, dry: bool = False, sms: int = H200_SMS) -> Iterator[Census]:
        patches = [(launch, "_gemm_kernel")] + [(qlaunch, k) for k in _QUANT_KERNELS]
        saved = [(mod, name, getattr(mod, name)) for mod, name in patches]
        for mod, name, fn in saved:
            setattr(mod, name, _Recorder(name, fn, self, dry))
        if dry:
            saved += [(launch, "interpreter_mode", launch.interpreter_mode)]
            saved += [(launch, "_num_sms", launch._num_sms)]
            launch.interpreter_mode = lambda: False  # type: ignore[assignment]
            launch._num_sms = lambda device: sms  # type: ignore[assignment]
        try:
            with _CopyCounter(self):
                yield self
        finally:
            for mod, name, fn in saved:
                setattr(mod, name, fn)


class _Recorder:
    """Stands in for a ``@triton.jit`` function: ``kernel[grid](*args, **constexprs)``."""

    def __init__(self, name: str, fn: object, census: Census, dry: bool) -> None:
        self.name, self.fn, self.census, self.dry = name, fn, census, dry

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        def run(*args: object, **kw: object) -> None:
            const = tuple(sorted((k, v) for k, v in kw.items() if k not in ("num_warps",)))
            self.census.launches.append(Launch(self.name, tuple(grid), const, _spec_of(args)))
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
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in COPY_OPS and not self.census.in_kernel:
            self.census.copies[name] = self.census.copies.get(name, 0) + 1
            if isinstance(out, torch.Tensor):
                self.census.copy_bytes += out.numel() * out.element_size()
        return out


# --------------------------------------------------------------------------------------------
# Per-shape census of the Linear paths
# --------------------------------------------------------------------------------------------


def _inputs(shape: Shape, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    M, N, K = shape.M, shape.N, shape.K
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(M, K, generator=g, device=device).to(dtype)
    b = (torch.randn(N, K, generator=g, device=device) * K**-0.5).to(dtype)
    return a, b, torch.randn(M, N, generator=g, device=device).to(dtype)


def census_call(fn: Callable[[], object], *, dry: bool, sms: int = H200_SMS) -> Census:
    """The census of one call of ``fn``."""
    c = Census()
    with c.record(dry=dry, sms=sms):
        fn()
    return c


def linear_paths(
    a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor
) -> dict[str, Callable[[], object]]:
    """The calls a Linear step makes, by path: 16-bit forward, 16-bit backward, FP8 blockwise
    forward + backward (quantization included)."""
    recipe = Fp8Recipe("blockwise")

    def fp8_step() -> object:
        _, state = gemm_fp8_forward(a, b, recipe)
        return gemm_fp8_backward(dout, state, recipe)

    return {
        "16bit.fwd": lambda: launch.gemm(a, b),
        "16bit.bwd": lambda: launch.gemm_backward(dout, a, b),
        "fp8_block.step": fp8_step,
    }


def summary(c: Census, sms: int) -> str:
    g = c.gemms()
    fill = min(1.0, min((x.ctas / sms for x in g), default=1.0))
    tma = sum(bool(x.get("USE_TMA")) for x in g)
    splits = "/".join(str(x.get("SPLIT_K")) for x in g)
    return (
        f"launches {len(c.launches):2d} gemm {len(g)} (tma {tma}, "
        f"scalar-load {c.unaligned_gemms()}, split_k {splits}, min fill {fill:.2f}) "
        f"quant {c.quant_passes()} "
        f"copies {sum(c.copies.values())} ({c.copy_bytes / 2**20:.1f} MiB) variants {c.variants()}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.kernels.gemm.census")
    p.add_argument("--set", dest="shapes", choices=sorted(SHAPE_SETS), default="odd")
    p.add_argument("--sms", type=int, default=H200_SMS, help="SM count the launcher assumes")
    args = p.parse_args(argv)
    for shape in SHAPE_SETS[args.shapes]():
        a, b, d = _inputs(shape, torch.bfloat16, "cpu")
        for path, fn in linear_paths(a, b, d).items():
            c = census_call(fn, dry=True, sms=args.sms)
            print(f"{shape.label:24s} {path:15s} {summary(c, args.sms)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
