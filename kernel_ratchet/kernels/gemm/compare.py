"""Side-by-side table of the Linear paths on a shape set: ours vs cuBLAS, FP8 vs 16-bit.

    python -m kernel_ratchet.kernels.gemm.bench --set odd [--min-run-time 0.1]
        [--granularity blockwise] [--fill-dispatch PATH] [-o table.md]

Per shape, on the same tensors (fresh from seed 0), each call timed with
:func:`kernel_ratchet.kernels.benchmarking.time_rounds` (median of blocked runs, after two warm-up
calls so compilation stays out; with ``--rounds R`` the calls of a row are timed R times,
interleaved, and each takes its median over the rounds):

* bf16 forward and fwd+bwd step of our Linear and of cuBLAS (``torch.matmul``);
* the FP8 Linear step (quantization included) on the FP8 path itself (dispatch off) and as
  dispatched by the shipped table, each as a ratio to our bf16 step, and the dispatched one
  to cuBLAS's bf16 step (what a user switching a bf16 Linear to our FP8 Linear gains).

The forward outputs are checked against cuBLAS (bf16: 40 dB, FP8: 25 dB); a shape that fails or
raises gets a FAIL row. ``--fill-dispatch PATH`` writes the FP8-path and bf16-path step times
as the dispatch table of :mod:`.dispatch`.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass, replace

import torch
import triton

from kernel_ratchet.harness.adapter import SNR_BF16, SNR_E4M3, Shape
from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm.adapter import make_linear_inputs
from kernel_ratchet.kernels.gemm.dispatch import DispatchTable, Measured, fp8_path
from kernel_ratchet.kernels.gemm.fp8 import Fp8Recipe, gemm_fp8_backward, gemm_fp8_forward
from kernel_ratchet.kernels.gemm.launch import gemm, gemm_backward
from kernel_ratchet.kernels.gemm.vendor import bf16_vendor

HEADER = (
    "| shape | bf16 fwd ours / cuBLAS TFLOPS | ratio | bf16 step ours / cuBLAS | ratio "
    "| FP8 step (FP8 path) | vs bf16 | dispatched | vs bf16 | vs cuBLAS | check |"
)


@dataclass(frozen=True)
class Row:
    """Times in milliseconds of one shape's paths (NaN where a path failed)."""

    shape: Shape
    fwd: float
    vendor_fwd: float
    step: float
    vendor_step: float
    fp8_step: float
    dispatched: str
    ok: bool
    note: str = ""

    def tflops(self, ms: float, factor: float) -> float:
        s = self.shape
        return factor * s.M * s.N * s.K / (ms * 1e-3) / 1e12

    def markdown(self) -> str:
        s = self.shape
        f, vf = self.tflops(self.fwd, 2), self.tflops(self.vendor_fwd, 2)
        st, vst = self.tflops(self.step, 6), self.tflops(self.vendor_step, 6)
        fp8 = self.tflops(self.fp8_step, 6)
        disp = self.step if self.dispatched == "bf16" else self.fp8_step
        return (
            f"| {s.label} | {f:.3g} / {vf:.3g} | {f / vf:.2f} | {st:.3g} / {vst:.3g} "
            f"| {st / vst:.2f} | {fp8:.3g} | {self.step / self.fp8_step:.2f} "
            f"| {self.dispatched} | {self.step / disp:.2f} | {self.vendor_step / disp:.2f} "
            f"| {'PASS' if self.ok else 'FAIL'}{' ' + self.note if self.note else ''} |"
        )


def measure(
    shape: Shape, granularity: str, timer, device: str, dtype: torch.dtype = torch.bfloat16
) -> Row:
    """One shape's row; ``timer({name: fn}) -> {name: ms}``. ``dtype`` of the 16-bit inputs:
    bf16 (fp16 for the CPU interpreter, whose bf16 ``tl.dot`` is wrong)."""
    case = make_linear_inputs(shape, 0, device, dtype)
    a, b, d = case.a, case.b, case.dout
    recipe = Fp8Recipe(granularity, dispatch=False)
    state: dict = {}

    def fp8_fwd():
        out, st = gemm_fp8_forward(a, b, recipe)
        state.update(st)
        return out

    vf, vb = bf16_vendor(case)
    ref = vf()
    ok = snr_db(gemm(a, b), ref) >= SNR_BF16 and snr_db(fp8_fwd(), ref) >= SNR_E4M3
    t = timer(
        {
            "fwd": lambda: gemm(a, b),
            "vendor_fwd": vf,
            "bwd": lambda: gemm_backward(d, a, b),
            "vendor_bwd": vb,
            "fp8_fwd": fp8_fwd,
            "fp8_bwd": lambda: gemm_fp8_backward(d, state, recipe),
        }
    )
    return Row(
        shape,
        fwd=t["fwd"],
        vendor_fwd=t["vendor_fwd"],
        step=t["fwd"] + t["bwd"],
        vendor_step=t["vendor_fwd"] + t["vendor_bwd"],
        fp8_step=t["fp8_fwd"] + t["fp8_bwd"],
        dispatched=fp8_path(granularity, shape.M, shape.N, shape.K),
        ok=ok,
    )


def redispatch(row: Row, table: DispatchTable, granularity: str) -> Row:
    """``row`` with its dispatched path as ``table`` decides it (times unchanged)."""
    s = row.shape
    return replace(row, dispatched=table.path_for(granularity, s.M, s.N, s.K))


def failed(shape: Shape, exc: Exception) -> Row:
    nan = math.nan
    note = f"({type(exc).__name__}: {' '.join(str(exc).split())[:80]})"
    return Row(shape, nan, nan, nan, nan, nan, "fp8", False, note)


def dispatch_table(rows: list[Row], granularity: str, command: str) -> DispatchTable:
    """The measured rows as a dispatch table (failed rows left out)."""
    got = tuple(
        Measured(granularity, r.shape.M, r.shape.N, r.shape.K, r.fp8_step, r.step)
        for r in rows
        if r.ok and r.fp8_step > 0 and r.step > 0
    )
    return DispatchTable(got, versions() | {"command": command})


def versions() -> dict[str, str]:
    info = {"torch": torch.__version__, "triton": triton.__version__}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            info["driver"] = out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return info


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def summary(rows: list[Row]) -> str:
    ok = [r for r in rows if r.ok]
    fwd = [r.vendor_fwd / r.fwd for r in ok]
    step = [r.vendor_step / r.step for r in ok]
    fp8 = [r.step / r.fp8_step for r in ok]
    dispatched = [r.step if r.dispatched == "bf16" else r.fp8_step for r in ok]
    disp = [r.step / d for r, d in zip(ok, dispatched, strict=True)]
    vend = [r.vendor_step / d for r, d in zip(ok, dispatched, strict=True)]
    return (
        f"PASS {len(ok)}/{len(rows)}; bf16 vs cuBLAS: fwd min {min(fwd, default=math.nan):.2f} "
        f"geomean {geomean(fwd):.2f}, step min {min(step, default=math.nan):.2f} geomean "
        f"{geomean(step):.2f}; FP8 path vs bf16 step: min {min(fp8, default=math.nan):.2f} "
        f"geomean {geomean(fp8):.2f}; FP8 dispatched vs bf16 step: min "
        f"{min(disp, default=math.nan):.2f} geomean {geomean(disp):.2f}; vs cuBLAS's bf16 "
        f"step: min {min(vend, default=math.nan):.2f} geomean {geomean(vend):.2f}"
    )
