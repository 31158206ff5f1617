"""Structural census of one MoE expert projection's training step (forward + backward).

    python -m kernel_ratchet.kernels.grouped_gemm.census [--shapes stress|offlist|target]
        [--kind bf16,fp8] [--sms 132] [--host] [--compile]

Per shape and path (bf16, FP8 blockwise) it prints what one ``forward + backward`` of the
grouped GEMM launches: kernels per step; for each GEMM launch the schedule's fill of the SMs
and the MMA rows it wastes (:mod:`.schedule`, from the routed group sizes); the bytes of the
quantization passes and what they cost at the HBM rate next to the GEMMs' time at the tensor
core peak; aten copies and fills; host reads of device data; with ``--host`` the host time of
a step. The calls run dry on meta tensors (no kernel runs, nothing is allocated; a host read
of device data would raise), so every model's full-size layer takes milliseconds on a CPU. The
launchers decide as on an sm_90 GPU: the warp-specialized Gluon kernels where their operands
qualify.
``--compile`` also compiles each distinct GEMM variant of the step for sm_90 on this machine and
prints its shared memory, registers and spill bytes (:mod:`kernel_ratchet.kernels.offline`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels.census import H200_SMS, Census, Launch, host_us
from kernel_ratchet.kernels.gemm import wgrad_ws_launch
from kernel_ratchet.kernels.grouped_gemm import fp8 as fp8_launch
from kernel_ratchet.kernels.grouped_gemm import (
    fp8_ws_launch,
    mm_ws_launch,
    wgrad_fp8_ws_launch,
)
from kernel_ratchet.kernels.grouped_gemm import launch as bf16_launch
from kernel_ratchet.kernels.grouped_gemm import shapes as S
from kernel_ratchet.kernels.grouped_gemm.schedule import Fill, longest_first, mm_fill, wgrad_fill
from kernel_ratchet.kernels.quant import dual as qdual
from kernel_ratchet.kernels.quant import dual_grouped as qdual_grouped
from kernel_ratchet.kernels.quant import launch as qlaunch
from kernel_ratchet.kernels.quant import weight as weight_quant

#: H200 SXM: HBM3e bytes/s and dense tensor-core peaks (FLOP/s) from the data sheet.
HBM_BPS = 4.8e12
PEAK_FLOPS = {"bf16": 989e12, "fp8": 1979e12}

#: The warp-specialized Gluon kernels and their launchers: chosen only on an sm_90 device, so
#: a census stands in for their ``supported`` (see :func:`gpu_overrides`).
GLUON = {
    "_grouped_mm_ws_kernel": mm_ws_launch,
    "_grouped_fp8_ws_kernel": fp8_ws_launch,
    "_grouped_wgrad_ws_kernel": wgrad_ws_launch,
    "_wgrad_fp8_ws_kernel": wgrad_fp8_ws_launch,
}
MM_KERNELS = ("_grouped_mm_kernel", "_grouped_mm_fp8_kernel")
WGRAD_KERNELS = ("_grouped_wgrad_kernel", "_grouped_wgrad_fp8_kernel")
GEMM_KERNELS = MM_KERNELS + WGRAD_KERNELS + tuple(GLUON)
QUANT_KERNELS = (
    "_weight_quant_kernel",
    "_dual_quant_kernel",
    "_dual_quant_grouped_kernel",
    "_group_quant_kernel",
)
PATCHES = (
    [(bf16_launch, k) for k in ("_grouped_mm_kernel", "_grouped_wgrad_kernel")]
    + [(fp8_launch, k) for k in ("_grouped_mm_fp8_kernel", "_grouped_wgrad_fp8_kernel")]
    + [(weight_quant, "_weight_quant_kernel"), (qdual, "_dual_quant_kernel")]
    + [(qdual_grouped, "_dual_quant_grouped_kernel")]
    + [(qlaunch, "_group_quant_kernel")]
    + [(mod, k) for k, mod in GLUON.items()]
)
PATHS = {
    "bf16": bf16_launch.grouped_gemm,
    "fp8": partial(fp8_launch.grouped_gemm_fp8_blockwise, dispatch=False),  # the FP8 path
}


def gpu_overrides(sms: int, gluon: bool = True) -> list[tuple[object, str, object]]:
    """Make the launchers decide as on an sm_90 GPU with ``sms`` SMs (buckets, persistent
    grid; with ``gluon`` the warp-specialized kernels where their operands qualify, else their
    Triton fallbacks)."""
    out: list[tuple[object, str, object]] = []
    for mod in (bf16_launch, fp8_launch):
        out += [(mod, "interpreting", lambda: False), (mod, "num_programs", lambda d: sms)]
    for mod in set(GLUON.values()):
        out.append((mod, "supported", mod.operands_ok if gluon else lambda *a: False))
    return out


def step_fn(
    kind: str, shape: Shape, device: str = "meta", dtype: torch.dtype = torch.bfloat16
) -> Callable[[], object]:
    """One forward + backward of ``shape`` on ``kind``'s path. On ``meta`` the tensors hold
    no data (dry census); elsewhere they are seeded random values (real runs)."""
    lens = S.lens_of(shape)
    T, N, K, G = shape.M, shape.N, shape.K, shape.B
    group_lens = torch.tensor(lens, dtype=torch.int32).to(device)
    if device == "meta":
        x, w, dout = (
            torch.empty(s, dtype=dtype, device=device) for s in ((T, K), (G, N, K), (T, N))
        )
    else:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(T, K, generator=gen).to(dtype).to(device)
        w = (torch.randn(G, N, K, generator=gen) * K**-0.5).to(dtype).to(device)
        dout = torch.randn(T, N, generator=gen).to(dtype).to(device)
    op = PATHS[kind]

    def step() -> tuple[torch.Tensor, ...]:
        xs, ws = x.detach().requires_grad_(), w.detach().requires_grad_()
        out = op(xs, ws, group_lens)
        out.backward(dout)
        return out, xs.grad, ws.grad

    return step


def census_step(kind: str, shape: Shape, *, sms: int = H200_SMS, gluon: bool = True) -> Census:
    """Dry census of one step (meta tensors, launchers deciding as on an sm_90 GPU of ``sms``
    SMs; ``gluon=False``: as where the warp-specialized kernels do not apply)."""
    c = Census()
    with c.instrument(PATCHES, gpu_overrides(sms, gluon), dry=True):
        step_fn(kind, shape)()
    return c


def fill_of(x: Launch, lens: list[int], sms: int) -> Fill:
    """Schedule quality of a recorded GEMM launch (a Triton kernel's integer arguments start
    N, K, G; a Gluon kernel's G, N, K)."""
    if x.kernel in GLUON:
        N, K, programs = x.ints[1], x.ints[2], int(x.get("NUM_SMS") or sms)
        if x.kernel == "_grouped_wgrad_ws_kernel":  # 128 x BLOCK_K tiles, 64-row steps
            bk = int(x.get("BLOCK_K"))  # type: ignore[arg-type]
            order = longest_first(lens) if x.get("ORDERED") else None
            fill = partial(wgrad_fill, aligned=False, sms=programs, round_robin=True, order=order)
            return fill(lens, N, K, 128, bk, 64)
        if x.kernel == "_wgrad_fp8_ws_kernel":  # 128 x BLOCK_N tiles over each group's chunks
            bn = int(x.get("BLOCK_N"))  # type: ignore[arg-type]
            return wgrad_fill(
                lens, N, K, 128, bn, 128, aligned=False, sms=programs, round_robin=True
            )
        return mm_fill(lens, N, 128, int(x.get("BLOCK_N")), programs)  # type: ignore[arg-type]
    N, K = x.ints[0], x.ints[1]
    block = {k: int(x.get(k) or 128) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")}
    bm, bn, bk = block["BLOCK_M"], block["BLOCK_N"], block["BLOCK_K"]
    if x.kernel in MM_KERNELS:
        return mm_fill(lens, N, bm, bn, int(x.get("NUM_PROGS") or sms))
    # the FP8 weight gradient walks 128-token chunks aligned to the global scale blocks, or
    # with GROUP_CHUNKS each group's own chunks from its first token
    fp8 = x.kernel == "_grouped_wgrad_fp8_kernel"
    aligned = fp8 and not x.get("GROUP_CHUNKS")
    return wgrad_fill(lens, N, K, bn, bk, 128 if fp8 else bm, aligned=aligned, sms=sms)


@dataclass(frozen=True)
class StepSummary:
    """What one step launches and moves, in numbers (see the module doc)."""

    launches: int
    fills: tuple[tuple[str, Fill], ...]
    quant_bytes: int
    copies: int
    copy_bytes: int
    syncs: int

    def quant_us(self) -> float:
        return self.quant_bytes / HBM_BPS * 1e6


def summarize(c: Census, lens: list[int], sms: int) -> StepSummary:
    gemms = [x for x in c.launches if x.kernel in GEMM_KERNELS]
    names = ["fwd", "dgrad", "wgrad"] if len(gemms) == 3 else [x.kernel for x in gemms]
    return StepSummary(
        launches=len(c.launches),
        fills=tuple((n, fill_of(x, lens, sms)) for n, x in zip(names, gemms, strict=True)),
        quant_bytes=sum(x.tensor_bytes for x in c.of(*QUANT_KERNELS)),
        copies=sum(c.copies.values()),
        copy_bytes=c.copy_bytes,
        syncs=sum(c.syncs.values()),
    )


def gemm_us(shape: Shape, kind: str) -> float:
    """The step's three GEMMs (6 T N K FLOPs) at the tensor-core peak, microseconds."""
    return 6 * shape.M * shape.N * shape.K / PEAK_FLOPS[kind] * 1e6


def line(shape: Shape, kind: str, s: StepSummary, host: float | None) -> str:
    fills = " ".join(f"{n} {f.fill:.2f}/{f.waste:.2f}" for n, f in s.fills)
    out = (
        f"{shape.label:36s} {kind:4s} launches {s.launches} | fill/waste {fills} | "
        f"quant {s.quant_bytes / 2**20:7.1f} MiB {s.quant_us():6.0f} us "
        f"vs gemm@peak {gemm_us(shape, kind):6.0f} us | copies {s.copies} "
        f"({s.copy_bytes / 2**20:.1f} MiB) | syncs {s.syncs}"
    )
    return out + (f" | host {host:.0f} us" if host is not None else "")


SHAPE_SETS = {"stress": S.moe_stress, "offlist": S.moe_offlist, "target": S.moe_target}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.kernels.grouped_gemm.census")
    p.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="offlist")
    p.add_argument("--kind", default="bf16,fp8", help="comma-separated paths: bf16, fp8")
    p.add_argument("--sms", type=int, default=H200_SMS, help="SM count the launchers assume")
    p.add_argument("--host", action="store_true", help="also time the host work per step")
    p.add_argument("--only", default="", help="comma-separated label substrings to keep")
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile each GEMM variant for sm_90 here: shared memory, registers, spills",
    )
    args = p.parse_args(argv)
    kinds = [k for k in args.kind.split(",") if k]
    bad = [k for k in kinds if k not in PATHS]
    if bad:
        p.error(f"unknown --kind {bad}; choose from {sorted(PATHS)}")
    keys = [k for k in args.only.split(",") if k]
    for shape in SHAPE_SETS[args.shapes]():
        if keys and not any(k in shape.label for k in keys):
            continue
        for kind in kinds:
            c = census_step(kind, shape, sms=args.sms)
            s = summarize(c, S.lens_of(shape), args.sms)
            fn = step_fn(kind, shape)
            host = host_us(fn, PATCHES, gpu_overrides(args.sms)) if args.host else None
            print(line(shape, kind, s, host), flush=True)
            if args.compile:
                print_resources(c)
    return 0


def print_resources(c: Census) -> None:
    """Shared memory, registers and spills of each distinct GEMM variant ``c`` launched."""
    from kernel_ratchet.kernels.offline import distinct, resources_by_kernel

    gemms = distinct([x for x in c.launches if x.kernel in MM_KERNELS + WGRAD_KERNELS])
    for k in sorted({x.kernel for x in c.launches if x.kernel in GLUON}):
        print(f"{'':36s} {k}: a Gluon kernel, compiled by {GLUON[k].__name__}.compile_offline")
    fns = {k: getattr(bf16_launch, k) for k in ("_grouped_mm_kernel", "_grouped_wgrad_kernel")}
    fns.update({k: getattr(fp8_launch, k) for k in MM_KERNELS[1:] + WGRAD_KERNELS[1:]})
    for x, r in zip(gemms, resources_by_kernel(gemms, fns), strict=True):
        blocks = "x".join(str(x.get(k)) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K") if x.get(k))
        warps = dict(x.options).get("num_warps")
        print(f"{'':36s} {x.kernel} {blocks} s{x.get('num_stages')} w{warps}: {r.line()}")


if __name__ == "__main__":
    raise SystemExit(main())
