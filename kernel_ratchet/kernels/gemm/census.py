"""Structural census of one Linear call: what it launches, copies and compiles, per shape.

    python -m kernel_ratchet.kernels.gemm.census [--set odd|model|cpu] [--sms 132] [--compile]

A GEMM that reaches a quarter of the vendor's speed on one shape and parity on another usually
does something structurally different there: a per-shape recompile, a whole-tensor copy, a
fallback from TMA to scalar loads, a grid that fills a fraction of the SMs. Those are visible
without a GPU. :class:`Census` records every launch of the dense GEMM kernel and of the FP8
quantization kernels (grid, constexpr arguments, the specialization Triton derives from the
integer and pointer arguments) and counts the copies PyTorch makes (``aten`` copy, clone, pad,
fill) while a call runs.

``dry=True`` records without running any kernel (outputs are garbage), so full-size shapes take
milliseconds on a CPU; it also makes the launcher decide as on an sm_90 GPU with ``sms`` SMs
(TMA eligibility by alignment instead of the interpreter's pointer path, and the
warp-specialized Gluon kernels where their operands qualify: the 16-bit GEMM of
``WS16_CONFIGS``, the blockwise FP8 GEMM, the few-row weight gradient; ``gluon=False`` records
their Triton fallbacks instead). Without ``dry`` the kernels
run (in the interpreter on CPU tensors) and the numbers are the real path's. ``--compile`` also
compiles each distinct GEMM variant for sm_90 on this machine and prints its shared memory,
registers and spill bytes (:mod:`kernel_ratchet.kernels.offline`).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels import census as common
from kernel_ratchet.kernels.census import H200_SMS, Launch, spec_of
from kernel_ratchet.kernels.gemm import (
    bf16_ws_launch,
    descriptor_launch,
    fast_launch,
    fp8_block_ws_launch,
    launch,
    quick_path,
    streamk_launch,
    wgrad_ws_launch,
)
from kernel_ratchet.kernels.gemm.bench import SHAPE_SETS
from kernel_ratchet.kernels.gemm.fp8 import Fp8Recipe, gemm_fp8_backward, gemm_fp8_forward
from kernel_ratchet.kernels.gemm.kernel import _gemm_kernel
from kernel_ratchet.kernels.gemm.kernel_streamk import _gemm_streamk_kernel
from kernel_ratchet.kernels.offline import distinct, resources_of
from kernel_ratchet.kernels.quant import dual as qdual
from kernel_ratchet.kernels.quant import launch as qlaunch

_QUANT_KERNELS = ("_amax_kernel", "_apply_scale_kernel", "_group_quant_kernel")
#: The dual 1x128 pass (both layouts from one read), which the blockwise recipe runs on ``a``
#: and ``dout`` where their rows are 16-byte aligned.
_DUAL_KERNELS = ("_dual_quant_kernel",)
#: The dense GEMM kernels: tiles (split-K, persistent) and stream-K. Both take A, B, C, two
#: more pointers, M, N, K and the (m, k), (n, k) strides first.
_GEMM_KERNELS = ("_gemm_kernel", "_gemm_streamk_kernel")
#: The warp-specialized Gluon kernels a Linear path may take: the few-row weight gradient, and
#: the blockwise FP8 GEMM (one scale per 128x128 block of B, or per column of it).
_WGRAD_GLUON = ("_grouped_wgrad_ws_kernel",)
_FP8_GLUON = ("_fp8_block_ws_kernel", "_fp8_block_ws_cols_kernel")
#: The warp-specialized 16-bit GEMM, which takes the 16-bit buckets of ``WS16_CONFIGS``.
_WS16_GLUON = ("_bf16_ws_kernel",)
_GLUON_KERNELS = _WGRAD_GLUON + _FP8_GLUON + _WS16_GLUON
#: The module that launches (and compiles offline) each Gluon kernel.
_GLUON_OWNERS = {
    **dict.fromkeys(_WGRAD_GLUON, wgrad_ws_launch),
    **dict.fromkeys(_FP8_GLUON, fp8_block_ws_launch),
    **dict.fromkeys(_WS16_GLUON, bf16_ws_launch),
}
_spec_of = spec_of


def _narrow_loads(x: Launch) -> bool:
    """A pointer-path operand whose row stride Triton cannot prove 16-divisible and whose
    ``A_ALIGN`` / ``B_ALIGN`` hint leaves its loads under 16 bytes (the strides are the
    integer arguments 9-12; the row stride is the first of a K-major operand's pair)."""
    itemsize = getattr(torch, str(x.spec[0][1]).split(".")[-1]).itemsize  # type: ignore[index]
    rows = {
        "A_ALIGN": x.spec[8] if x.get("A_KMAJOR") else x.spec[9],
        "B_ALIGN": x.spec[10] if x.get("B_KMAJOR") else x.spec[11],
    }
    return any(
        not (s[1] or s[2]) and int(x.get(hint) or 1) * itemsize < 16  # type: ignore[index]
        for hint, s in rows.items()
    )


class Census(common.Census):
    """Launches and copies of the dense GEMM and quantization kernels inside :meth:`record`."""

    def gemms(self) -> list[Launch]:
        return self.of(*_GEMM_KERNELS)

    def quant_passes(self) -> int:
        return len(self.of(*_QUANT_KERNELS, *_DUAL_KERNELS))

    def unaligned_gemms(self) -> int:
        """GEMM launches on the pointer path whose loads are narrower than 16 bytes: a row
        stride Triton cannot prove 16-divisible, not made up for by the ``A_ALIGN`` /
        ``B_ALIGN`` hint."""
        return sum(not x.get("USE_TMA") and _narrow_loads(x) for x in self.gemms())

    def gluon(self) -> list[Launch]:
        return self.of(*_GLUON_KERNELS)

    def record(self, *, dry: bool = False, sms: int = H200_SMS, gluon: bool = True):
        """Record the launches; ``dry``: decide as on an sm_90 GPU with ``sms`` SMs, the Gluon
        kernels where their operands qualify (with ``gluon``; else their Triton fallbacks)."""
        patches = [(launch, _GEMM_KERNELS[0]), (streamk_launch, _GEMM_KERNELS[1])]
        patches += [(qlaunch, k) for k in _QUANT_KERNELS]
        patches += [(qdual, k) for k in _DUAL_KERNELS]
        patches += [(wgrad_ws_launch, k) for k in _WGRAD_GLUON]
        patches += [(fp8_block_ws_launch, k) for k in _FP8_GLUON]
        patches += [(bf16_ws_launch, k) for k in _WS16_GLUON]
        qualifies = wgrad_ws_launch.operands_ok if gluon else lambda *a: False
        overrides = [
            (launch, "interpreter_mode", lambda: False),
            (launch, "_num_sms", lambda device: sms),
            (launch, "_on_sm90", lambda t: gluon),
            (wgrad_ws_launch, "supported", qualifies),
            (bf16_ws_launch, "supported_dtypes", functools.partial(_ws16_dtypes, gluon)),
        ]
        return self.instrument(patches, overrides if dry else _NO_RUNNERS, dry=dry)


def _ws16_dtypes(gluon: bool, a: torch.Tensor, b: torch.Tensor, out: torch.dtype) -> bool:
    """:func:`.bf16_ws_launch.supported_dtypes` as on an sm_90 GPU (with ``gluon``): one
    16-bit dtype for both operands and the output, whatever device they are on."""
    return gluon and a.dtype in (torch.bfloat16, torch.float16) and b.dtype is a.dtype is out


def _launch_through_triton(fn, runners, grid, args, kwargs, tensors, key=None) -> None:
    fn[grid](*args, **kwargs)


def _descriptors_through_triton(fn, runners, *args) -> None:
    _described_launch(fn, None, *args)


_described_launch = descriptor_launch.launch
#: A real run's repeated calls go through what their first call bound: the quick path's
#: entries and the launch plans' direct runners, which call the compiled kernel and not the
#: recorder. While a census records, every launch goes through the kernel's ``[grid]``.
_NO_RUNNERS = (
    (quick_path, "get", lambda key: None),
    (fast_launch, "launch", _launch_through_triton),
    (descriptor_launch, "launch", _descriptors_through_triton),
)


# --------------------------------------------------------------------------------------------
# Per-shape census of the Linear paths
# --------------------------------------------------------------------------------------------


def inputs(shape: Shape, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    """A Linear's ``a`` [M, K], ``b`` [N, K] and ``dout`` [M, N] for one shape (seed 0)."""
    M, N, K = shape.M, shape.N, shape.K
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(M, K, generator=g, device=device).to(dtype)
    b = (torch.randn(N, K, generator=g, device=device) * K**-0.5).to(dtype)
    return a, b, torch.randn(M, N, generator=g, device=device).to(dtype)


def census_call(
    fn: Callable[[], object], *, dry: bool, sms: int = H200_SMS, gluon: bool = True
) -> Census:
    """The census of one call of ``fn`` (``gluon``: see :meth:`Census.record`)."""
    c = Census()
    with c.record(dry=dry, sms=sms, gluon=gluon):
        fn()
    return c


def linear_paths(
    a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor
) -> dict[str, Callable[[], object]]:
    """The calls a Linear step makes, by path: 16-bit forward, 16-bit backward, FP8 blockwise
    forward + backward (quantization included). The FP8 path is the path itself, with the
    dispatch off: where the shipped table sends a shape to the 16-bit path, that path is the
    16-bit entries'."""
    recipe = Fp8Recipe("blockwise", dispatch=False)

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
    splits = "/".join("sk" if x.get("PROGRAMS") else str(x.get("SPLIT_K")) for x in g) or "-"
    return (
        f"launches {len(c.launches):2d} gemm {len(g)} (tma {tma}, "
        f"scalar-load {c.unaligned_gemms()}, split_k {splits}, min fill {fill:.2f}) "
        f"gluon {len(c.gluon())} quant {c.quant_passes()} "
        f"copies {sum(c.copies.values())} ({c.copy_bytes / 2**20:.1f} MiB) variants {c.variants()}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.kernels.gemm.census")
    p.add_argument("--set", dest="shapes", choices=sorted(SHAPE_SETS), default="odd")
    p.add_argument("--sms", type=int, default=H200_SMS, help="SM count the launcher assumes")
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile each GEMM variant for sm_90 here: shared memory, registers, spills",
    )
    args = p.parse_args(argv)
    for shape in SHAPE_SETS[args.shapes]():
        a, b, d = inputs(shape, torch.bfloat16, "cpu")
        for path, fn in linear_paths(a, b, d).items():
            c = census_call(fn, dry=True, sms=args.sms)
            print(f"{shape.label:24s} {path:15s} {summary(c, args.sms)}", flush=True)
            if args.compile:
                for kernel in (_gemm_kernel, _gemm_streamk_kernel):
                    variants = distinct(c.of(kernel.__name__))
                    for x, r in zip(variants, resources_of(kernel, variants), strict=True):
                        print(f"{'':40s} {tile(x)}: {r.line()}", flush=True)
                for k in sorted({x.kernel for x in c.gluon()}):
                    owner = _GLUON_OWNERS[k].__name__
                    print(f"{'':40s} {k}: a Gluon kernel, compiled by {owner}.compile_offline")
    return 0


def tile(x: Launch) -> str:
    """A GEMM launch's tile, stages, warps and split, in one word."""
    g = x.get
    warps = dict(x.options).get("num_warps")
    return (
        f"{g('BLOCK_M')}x{g('BLOCK_N')}x{g('BLOCK_K')} s{g('num_stages')} w{warps} "
        f"split{g('SPLIT_K')}{' tma' if g('USE_TMA') else ''}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
