"""Red-team candidates for the checks of the timed calls: cheats aimed at the spot checks
and the checks after each sample, and honest ops those checks must let pass (a spot
reference of their own, a backward on the forward's autograd graph). Imported through
:mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernel_ratchet.harness.adapter import SNR_FP32, Shape
from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


class SeesUnchangedInputs(TinyGemm):
    """Honest, but raises where a timed sample starts (its last output NaN-poisoned) on the
    input values of the sample before: a cheat would skip the work there, knowing such a
    sample is not compared with the reference."""

    def __init__(self) -> None:
        self.last: tuple[int, torch.Tensor] | None = None

    def forward(self, case: Case) -> torch.Tensor:
        version = case.a._version + case.b._version
        poisoned = self.last is not None and bool(self.last[1].isnan().any())
        if poisoned and version == self.last[0]:
            raise RuntimeError("a timed sample started on unchanged inputs")
        out = matmul_nt(case.a, case.b)
        self.last = (version, out)
        return out


class WrongSpotReference(TinyGemm):
    """Honest kernel, but a spot reference of other inputs' result: every spot check must fail
    (proves the timed calls are compared with ``spot_reference``, not ``reference``)."""

    def spot_reference(self, case: Case) -> dict[str, torch.Tensor]:
        return {name: torch.randn_like(t) for name, t in self.reference(case).items()}


class CheapSpotReference(TinyGemm):
    """Honest kernel and a spot reference 1e-5 off the full one (100 dB, above the 80 dB
    threshold of this fp32 op): passes. (fp16 rounding, 74 dB, would fail: a spot reference
    must be accurate to each output's threshold.)"""

    def spot_reference(self, case: Case) -> dict[str, torch.Tensor]:
        return {name: t * (1 + 1e-5) for name, t in self.reference(case).items()}


@dataclass
class GraphCase:
    a: torch.Tensor
    b: torch.Tensor
    rows: torch.Tensor  # routing an autograd graph saves, as a MoE layer saves its group sizes
    dout: torch.Tensor
    out: torch.Tensor | None = None


class _Routed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b, rows)
        return matmul_nt(a, b)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        a, b, _ = ctx.saved_tensors
        return g @ b, g.t() @ a, None


class GraphBackward(TinyGemm):
    """Honest, with a backward that runs on the autograd graph its forward left in the case and
    no ``forward_state`` declared (the grouped GEMM's pattern): the graph saved case tensors,
    so the spot checks' new input values need a new forward, not only a copy."""

    has_backward = True
    min_snr_db = {"default": SNR_FP32}

    def make_case(self, shape: Shape, seed: int, device: str) -> GraphCase:
        g = torch.Generator(device="cpu").manual_seed(seed)
        a = torch.randn(shape.M, shape.K, generator=g).to(device).requires_grad_()
        b = torch.randn(shape.N, shape.K, generator=g).to(device).requires_grad_()
        dout = torch.randn(shape.M, shape.N, generator=g).to(device)
        return GraphCase(a, b, torch.arange(shape.M, dtype=torch.int32, device=device), dout)

    def forward(self, case: GraphCase) -> torch.Tensor:  # type: ignore[override]
        case.out = _Routed.apply(case.a, case.b, case.rows)
        return case.out

    def backward(self, case: GraphCase) -> Any:
        if case.out is None:
            self.forward(case)
        return torch.autograd.grad(case.out, (case.a, case.b), case.dout, retain_graph=True)

    def outputs(self, case: GraphCase) -> dict[str, torch.Tensor]:  # type: ignore[override]
        out = _Routed.apply(case.a, case.b, case.rows)
        da, db = torch.autograd.grad(out, (case.a, case.b), case.dout)
        return {"out": out.detach(), "da": da, "db": db}

    def reference(self, case: GraphCase) -> dict[str, torch.Tensor]:  # type: ignore[override]
        a, b, dout = (t.detach().double() for t in (case.a, case.b, case.dout))
        return {"out": (a @ b.t()).float(), "da": (dout @ b).float(), "db": (dout.t() @ a).float()}

    def flops(self, shape: Shape) -> tuple[float, float]:
        mnk = 2.0 * shape.M * shape.N * shape.K
        return (mnk, 2 * mnk)


class TogglesTheDraw(TinyGemm):
    """Skips the work on every other timed sample and, for those samples only, has the spot
    draw say "not compared"; on the others it computes and puts the draw back, so nothing is
    left patched when the request ends."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.samples = 0
        self.real: Any = None

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import timed_checks

        self.real = self.real or timed_checks._draw
        version = case.a._version + case.b._version
        if version != self.version:
            self.version, self.samples = version, self.samples + 1
        if self.samples % 2 == 0:
            timed_checks._draw = lambda n: n  # never below the checks left: not compared
            return torch.zeros(case.a.shape[0], case.b.shape[0])
        timed_checks._draw = self.real
        return matmul_nt(case.a, case.b)


class UnhooksTheSamples(TinyGemm):
    """Replaces the after-sample checks with nothing on its first call and puts them back on
    its last timed one, returning zeros in between."""

    calls = 0

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import timed_checks

        klass = timed_checks.TimedCallChecks
        UnhooksTheSamples.calls += 1
        if UnhooksTheSamples.calls == 1:
            klass._real_after = klass.after_sample
            klass.after_sample = lambda self, index: None
        if UnhooksTheSamples.calls >= 6 and hasattr(klass, "_real_after"):
            klass.after_sample = klass._real_after
            del klass._real_after
            return matmul_nt(case.a, case.b)
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class BatchTail(TinyGemm):
    """Computes only the last call of each batched sample (the one the checks used to read):
    it learns the batch size from the second sample's calls between two input changes, and
    makes the calibration call look instant so that the batch is as large as allowed."""

    def __init__(self) -> None:
        self.case_id: int | None = None

    def forward(self, case: Case) -> torch.Tensor:
        version = case.a._version + case.b._version
        if self.case_id != id(case):
            self.case_id, self.version, self.sample, self.calls = id(case), version, 0, 0
            self.lens: list[int] = []
            self.first: torch.Tensor | None = None
        if version != self.version:
            self.lens.append(self.calls)
            self.version, self.sample, self.calls = version, self.sample + 1, 0
        self.calls += 1
        if self.sample == 0 and self.calls >= 2 and self.first is not None:
            return self.first.clone()  # the calibration call: instant and right
        batch = self.lens[1] if len(self.lens) >= 2 else 0
        if self.sample >= 2 and batch >= 2 and self.calls % batch:
            return torch.empty(case.a.shape[0], case.b.shape[0])  # not the last: skipped
        out = matmul_nt(case.a, case.b)
        if self.sample == 0 and self.calls == 1:
            self.first = out.clone()
        return out


class TupleSkip(TinyGemm):
    """Honest for the check's calls, then returns two tensors whose names match none of the
    reference's: a spot check that compares nothing used to count as made."""

    calls = 0

    def forward(self, case: Case) -> Any:
        TupleSkip.calls += 1
        if TupleSkip.calls <= 3:
            return matmul_nt(case.a, case.b)
        return (torch.zeros(case.a.shape[0], case.b.shape[0]), torch.zeros(1))
