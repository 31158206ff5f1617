"""Grouped GEMM step table: ours against ``torch._grouped_mm`` (``bench --step``).

    python -m kernel_ratchet.kernels.grouped_gemm.bench --step \\
        --shapes moe_target,moe_offlist [-o table.md] [--rounds 5]

Per shape, on one set of inputs (seed 0): the bf16 forward and fwd+bwd step of our grouped
GEMM and of ``torch._grouped_mm`` (bf16; its backward by autograd where this torch has it,
else composed from ``torch._grouped_mm`` calls for dX and dW), and our FP8 blockwise step
(quantization included) next to torch's bf16 step. Every path runs once untimed (compilation
stays out), then the paths are timed interleaved: ``--rounds`` rounds, each timing every path
once, medians reported. A timing is a batch of eager calls back to back after a warm-up
(:func:`~kernel_ratchet.kernels.benchmarking.back_to_back_ms`: the sustained clock, launches
included, what a campaign's step time measures); ``--flush-l2`` times each call alone after an
L2 flush (``triton.testing.do_bench``), where the idle flush lets the clock run above the rate
a training step sustains. A step is ``out = f(x, w); dx, dw = grad(out, (x, w), dout)`` on
inputs that require grad; torch gets its offsets precomputed on the device (ours read
``group_lens``). Our FP8 step is the FP8 path itself (``dispatch=False``).

SNR (dB) of our output and both gradients, bf16 and FP8, against the fp32 reference of
:mod:`.reference` (the weight gradient on the groups of :func:`.adapter.checked_groups` for
real layer sizes); a shape passes at 40 dB (bf16) and 25 dB (FP8).

``--fill-dispatch PATH`` writes our FP8 and bf16 steps to the FP8 dispatch table
(:mod:`.dispatch`). ``--dry-run`` runs on the CPU through the Triton interpreter on tiny shapes,
fp16 operands (its bf16 ``tl.dot`` is wrong), host wall time: it checks the table, not the speed.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import Shape, load_shapes
from kernel_ratchet.kernels.benchmarking import (
    back_to_back_ms,
    do_bench_ms,
    host_issue_ms,
    interleaved_medians,
    snr_gpu,
    tflops,
    wall_ms,
)
from kernel_ratchet.kernels.gemm.bench_set import measuring_command
from kernel_ratchet.kernels.grouped_gemm import dispatch
from kernel_ratchet.kernels.grouped_gemm.adapter import (
    GroupedCase,
    GroupedGemmBf16Adapter,
    GroupedGemmFp8BlockwiseAdapter,
    make_grouped_case,
)
from kernel_ratchet.kernels.grouped_gemm.launch import interpreting
from kernel_ratchet.kernels.grouped_gemm.prepared_weight import prepare_weight
from kernel_ratchet.kernels.grouped_gemm.step_summary import OUTS, PREPARED, summary

_SHAPES_MODULE = "kernel_ratchet.kernels.grouped_gemm.shapes"

#: Timed paths: ours and torch's bf16 forward and step, our FP8 step.
PATHS = ("fwd", "torch_fwd", "step", "torch_step", "fp8_step")
#: With ``--prepared-weight``: our FP8 step with the weight quantized once beforehand
#: (:mod:`.prepared_weight`), as under gradient accumulation (``PREPARED``); its SNRs are the
#: FP8 step's (the same bits).
_CELLS = (
    "shape | B | M | N | K | bf16 fwd ours / torch TFLOPS | ratio | bf16 step ours / torch "
    "| ratio | FP8 step | vs torch bf16 step"
)
_TAIL = "bf16 SNR out/dx/dw | FP8 SNR out/dx/dw | check"


def header(prepared: bool = False) -> str:
    """The table's header row; ``prepared`` adds the prepared-weight FP8 step's two columns."""
    extra = " | FP8 step, weight prepared | vs torch bf16 step" if prepared else ""
    return f"| {_CELLS}{extra} | {_TAIL} |"


ADAPTERS = {"bf16": GroupedGemmBf16Adapter(), "fp8": GroupedGemmFp8BlockwiseAdapter()}


@dataclass(frozen=True)
class TorchGmm:
    """How this torch runs a bf16 grouped step: ``mode`` "autograd" or "composed", or None
    with ``why`` when ``torch._grouped_mm`` cannot run here."""

    mode: str | None
    why: str = ""

    def describe(self) -> str:
        if self.mode is None:
            return f"torch._grouped_mm: {self.why}"
        how = "autograd" if self.mode == "autograd" else "composed of torch._grouped_mm calls"
        return f"torch._grouped_mm {torch.__version__}: backward by {how}"


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:100]}"


def _torch_step(x, w, d, offs, mode: str) -> Callable[[], object]:
    """Torch's bf16 step on ``x`` [M, K], ``w`` [G, N, K], ``dout`` ``d`` [M, N]."""
    gmm = torch._grouped_mm
    if mode == "autograd":
        return lambda: torch.autograd.grad(gmm(x, w.transpose(-2, -1), offs=offs), (x, w), d)

    def composed() -> object:
        with torch.no_grad():
            out = gmm(x, w.transpose(-2, -1), offs=offs)
            dx = gmm(d, w, offs=offs)
            dw = gmm(d.t(), x, offs=offs)
        return out, dx, dw

    return composed


def probe_torch(device: str) -> TorchGmm:
    """Which torch bf16 grouped step runs on ``device`` (tried on a tiny case)."""
    if not hasattr(torch, "_grouped_mm"):
        return TorchGmm(None, f"not available in this torch ({torch.__version__})")
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(32, 64, generator=gen).to(device, torch.bfloat16).requires_grad_()
    w = torch.randn(2, 32, 64, generator=gen).to(device, torch.bfloat16).requires_grad_()
    offs = torch.tensor([16, 32], dtype=torch.int32, device=device)
    d = torch.ones(32, 32, dtype=torch.bfloat16, device=device)
    errors = []
    for mode in ("autograd", "composed"):
        try:
            _torch_step(x, w, d, offs, mode)()
            return TorchGmm(mode)
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            errors.append(_short(exc))
    return TorchGmm(None, f"not available in this torch ({torch.__version__}: {errors[-1]})")


@dataclass(frozen=True)
class StepRow:
    """One shape: times in ms per path (NaN where a path did not run), SNRs in dB."""

    shape: Shape
    ms: dict[str, float]
    snr: dict[str, float] = field(default_factory=dict)
    ok: bool = False
    note: str = ""
    #: ms of host time to issue one call, per step path (on a GPU: :func:`host_issue_ms`)
    host: dict[str, float] = field(default_factory=dict)

    def rate(self, path: str) -> float:
        factor = 2.0 if path.endswith("fwd") else 6.0
        return tflops(factor * self.shape.M * self.shape.N * self.shape.K, self.ms[path])

    def ratio(self, ours: str, theirs: str) -> float:
        """Speed of ``ours`` over ``theirs`` (theirs' time / ours')."""
        return self.ms[theirs] / self.ms[ours]

    def markdown(self) -> str:
        s = self.shape

        def snr(kind: str) -> str:
            return "/".join(f"{self.snr.get(f'{kind}_{k}', math.nan):.1f}" for k in OUTS)

        def num(v: float, fmt: str) -> str:
            return "n/a" if not math.isfinite(v) else format(v, fmt)

        check = ("PASS" if self.ok else "FAIL") + (f" {self.note}" if self.note else "")
        cells = [
            s.label,
            str(s.B),
            str(s.M),
            str(s.N),
            str(s.K),
            f"{num(self.rate('fwd'), '.4g')} / {num(self.rate('torch_fwd'), '.4g')}",
            num(self.ratio("fwd", "torch_fwd"), ".2f"),
            f"{num(self.rate('step'), '.4g')} / {num(self.rate('torch_step'), '.4g')}",
            num(self.ratio("step", "torch_step"), ".2f"),
            num(self.rate("fp8_step"), ".4g"),
            num(self.ratio("fp8_step", "torch_step"), ".2f"),
            *(
                (num(self.rate(PREPARED), ".4g"), num(self.ratio(PREPARED, "torch_step"), ".2f"))
                if PREPARED in self.ms
                else ()
            ),
            snr("bf16"),
            snr("fp8"),
            check,
        ]
        return "| " + " | ".join(cells) + " |"


def _snrs(case: GroupedCase) -> tuple[dict[str, float], bool]:
    """SNR of both paths' outputs against one fp32 reference, and whether all pass."""
    ref = ADAPTERS["bf16"].reference(case)
    snr, ok = {}, True
    for kind, adapter in ADAPTERS.items():
        got = adapter.outputs(case)
        for k in OUTS:
            snr[f"{kind}_{k}"] = snr_gpu(got[k], ref[k])
            ok = ok and snr[f"{kind}_{k}"] >= adapter.threshold(k)
        del got
    return snr, ok


def _our_fns(case: GroupedCase, prepared: bool = False) -> dict[str, Callable[[], object]]:
    x, w, lens, d = case.x, case.w, case.group_lens, case.dout
    bf16, fp8 = ADAPTERS["bf16"].op, ADAPTERS["fp8"].op
    fns = {
        "fwd": lambda: bf16(x, w, lens),
        "step": lambda: torch.autograd.grad(bf16(x, w, lens), (x, w), d),
        "fp8_step": lambda: torch.autograd.grad(fp8(x, w, lens), (x, w), d),
    }
    if prepared:  # quantized once, outside the timed calls
        pw = prepare_weight(w)
        fns[PREPARED] = lambda: torch.autograd.grad(fp8(x, w, lens, prepared=pw), (x, w), d)
    return fns


def _torch_fns(case: GroupedCase, gmm: TorchGmm) -> dict[str, Callable[[], object]]:
    """Torch's forward and step on bf16 copies of the inputs, or {} when it cannot run."""
    if gmm.mode is None:
        return {}
    x = case.x.detach().to(torch.bfloat16).requires_grad_()
    w = case.w.detach().to(torch.bfloat16).requires_grad_()
    d = case.dout.to(torch.bfloat16)
    offs = torch.cumsum(case.group_lens, 0, dtype=torch.int32)
    return {
        "torch_fwd": lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs),
        "torch_step": _torch_step(x, w, d, offs, gmm.mode),
    }


def measure(
    shape: Shape,
    gmm: TorchGmm,
    timer,
    rounds: int,
    device: str,
    warm: bool = True,
    prepared: bool = False,
) -> StepRow:
    """One shape's row: SNR check, one untimed call of every path (torch's always, ours when
    ``warm``: it compiles them), interleaved timing; ``prepared`` adds :data:`PREPARED`."""
    case = make_grouped_case(shape, 0, device)
    snr, ok = _snrs(case)
    fns = _our_fns(case, prepared)
    note = "" if gmm.mode else f"({gmm.why})"
    theirs = _torch_fns(case, gmm)
    try:
        for fn in theirs.values():
            fn()
        fns.update(theirs)
    except (RuntimeError, TypeError, ValueError) as exc:
        note = f"(torch._grouped_mm failed: {_short(exc)})"
    for name in ("fwd", "step", "fp8_step", PREPARED) if warm else ():
        if name in fns:
            fns[name]()
    ms = dict.fromkeys(PATHS + ((PREPARED,) if prepared else ()), math.nan)
    ms.update(interleaved_medians(fns, timer, rounds))
    steps = ("step", "torch_step", "fp8_step", PREPARED)
    host = {k: host_issue_ms(fns[k]) for k in steps if k in fns and device == "cuda"}
    return StepRow(shape, ms, snr, ok, note, host)


def failed(shape: Shape, exc: Exception, prepared: bool = False) -> StepRow:
    paths = PATHS + ((PREPARED,) if prepared else ())
    return StepRow(shape, dict.fromkeys(paths, math.nan), note=f"({_short(exc)})")


def resolve_sets(spec: str) -> dict[str, list[Shape]]:
    """Comma-separated shape sets, each by its name: names in :mod:`.shapes` (``moe_target``)
    or ``module:attr`` specs; labels must stay unique across them. Raises ProfileError for a
    bad name."""
    sets: dict[str, list[Shape]] = {}
    parts = [spec] if spec.startswith("inline:") else spec.split(",")
    for part in filter(None, (p.strip() for p in parts)):
        got = load_shapes(part if ":" in part else f"{_SHAPES_MODULE}:{part}")
        sets[part] = sets.get(part, []) + got
    labels = [s.label for shapes in sets.values() for s in shapes]
    if not labels or len(set(labels)) != len(labels):
        raise ProfileError(f"shape sets {spec!r} are empty or repeat a label")
    return sets


def run(args: argparse.Namespace) -> int:
    """The table on ``args.shapes``; 2 on a usage error, 1 when a shape fails, else 0."""
    if args.dry_run and not interpreting():
        print("--dry-run runs in the Triton interpreter: set TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    if not args.dry_run and not torch.cuda.is_available():
        print("--step needs a CUDA GPU (or --dry-run with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    default = "tiny_step" if args.dry_run else "moe_target,moe_offlist"
    try:
        sets = resolve_sets(args.shapes or default)
    except ProfileError as exc:
        print(f"--shapes: {exc}", file=sys.stderr)
        return 2
    if args.only:
        keep = args.only.split(",")
        sets = {n: [s for s in v if any(k in s.label for k in keep)] for n, v in sets.items()}
    shapes = [s for v in sets.values() for s in v]
    device = "cpu" if args.dry_run else "cuda"
    timer = wall_ms if args.dry_run else do_bench_ms() if args.flush_l2 else back_to_back_ms()
    gmm = probe_torch(device)
    prepared = getattr(args, "prepared_weight", False)
    head = header(prepared)
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    print("\n".join(lines), flush=True)
    rows = []
    for shape in shapes:
        try:
            warm = not args.dry_run
            row = measure(shape, gmm, timer, args.rounds, device, warm, prepared)
        except Exception as exc:  # a failing shape is a FAIL row, not the end of the table
            row = failed(shape, exc, prepared)
        rows.append(row)
        lines.append(row.markdown())
        print(lines[-1], flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()
    tail = ["", *summary(rows, gmm, {n: [s.label for s in v] for n, v in sets.items() if v})]
    print("\n".join(tail))
    lines += tail
    if getattr(args, "fill_dispatch", None):
        command = measuring_command(
            args.argv, args.rounds, "kernel_ratchet.kernels.grouped_gemm.bench"
        )
        print(dispatch.fill(rows, Path(args.fill_dispatch), args.merge, command))
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
    return 0 if all(r.ok for r in rows) else 1
