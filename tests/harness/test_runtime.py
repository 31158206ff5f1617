"""The quick-harness runtime (kernel_ratchet.harness.runtime) with small in-test adapters.

The adapters below are plain PyTorch on the CPU; ``main()`` imports them by
``tests.harness.test_runtime:<Class>``.
"""

from __future__ import annotations

import io
import math
import statistics
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from kernel_ratchet.harness import failures
from kernel_ratchet.harness.adapter import SNR_FP32, Adapter, Shape
from kernel_ratchet.harness.csv_schema import SCHEMAS, read_csv, write_csv
from kernel_ratchet.harness.runtime import main, result_cells, run_harness, run_shape
from kernel_ratchet.harness.timing.engine import Timing, TimingEngine
from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine

HERE = __name__  # "tests.harness.test_runtime": the module main() imports adapters from
GEMM, MEMORY = SCHEMAS["gemm"], SCHEMAS["memory"]
FAST = {"samples": 2, "warmup": 0, "min_sample_ms": 0.2}


@dataclass
class Case:
    a: torch.Tensor
    b: torch.Tensor


class GoodGemm(Adapter):
    """out = a @ b.T in float32 against a float64 reference; counts forward calls."""

    schema = "gemm"
    min_snr_db = {"out": SNR_FP32}
    scale = 1.0
    fail_label = ""

    def __init__(self) -> None:
        self.forward_calls: dict[str, int] = {}

    def make_case(self, shape: Shape, seed: int, device: str) -> Any:
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(shape.M, shape.K, generator=g).to(device)
        b = torch.randn(shape.N, shape.K, generator=g).to(device)
        case = Case(a, b)
        case.label = shape.label  # type: ignore[attr-defined]
        return case

    def forward(self, case: Any) -> torch.Tensor:
        self.forward_calls[case.label] = self.forward_calls.get(case.label, 0) + 1
        if case.label == self.fail_label:
            raise RuntimeError("kernel exploded")
        return (case.a @ case.b.T) * self.scale

    def outputs(self, case: Any) -> dict[str, torch.Tensor]:
        return {"out": self.forward(case)}

    def reference(self, case: Any) -> dict[str, torch.Tensor]:
        return {"out": case.a.double() @ case.b.double().T}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (2.0 * shape.M * shape.N * shape.K, 0.0)


class ExplodingGemm(GoodGemm):
    fail_label = "boom"


class WrongGemm(GoodGemm):
    scale = 1.1  # 10% relative error = 20 dB


class GradGemm(GoodGemm):
    """Forward + backward: gradients of sum(a @ b.T) w.r.t. a and b."""

    has_backward = True

    def make_case(self, shape: Shape, seed: int, device: str) -> Any:
        case = super().make_case(shape, seed, device)
        case.a.requires_grad_(True)
        case.b.requires_grad_(True)
        return case

    def backward(self, case: Any) -> Any:
        case.a.grad = case.b.grad = None
        (case.a @ case.b.T).sum().backward()
        return case.a.grad, case.b.grad

    def outputs(self, case: Any) -> dict[str, torch.Tensor]:
        out = self.forward(case).detach()
        da, db = self.backward(case)
        return {"out": out, "da": da.clone(), "db": db.clone()}

    def reference(self, case: Any) -> dict[str, torch.Tensor]:
        a, b = case.a.detach().double(), case.b.detach().double()
        ones = torch.ones(a.shape[0], b.shape[0], dtype=torch.float64)
        return {"out": a @ b.T, "da": ones @ b, "db": ones.T @ a}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (2.0 * shape.M * shape.N * shape.K, 4.0 * shape.M * shape.N * shape.K)


class Copy(Adapter):
    """A memory-bound op: y = x.clone()."""

    schema = "memory"

    def make_case(self, shape: Shape, seed: int, device: str) -> Any:
        return torch.randn(shape.B, shape.M, shape.N, generator=torch.Generator().manual_seed(seed))

    def forward(self, case: Any) -> torch.Tensor:
        return case.clone()

    def outputs(self, case: Any) -> dict[str, torch.Tensor]:
        return {"out": self.forward(case)}

    def reference(self, case: Any) -> dict[str, torch.Tensor]:
        return {"out": case.double()}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (0.0, 0.0)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        return (2.0 * 4 * shape.B * shape.M * shape.N, 0.0)


class FixedEngine(TimingEngine):
    """Calls ``fn`` once per measure and reports fixed samples (1, 2, 4 ms)."""

    name = "fixed"

    def __init__(self) -> None:
        self.measured = 0

    def measure(self, fn, hooks=None):
        if hooks is not None:
            hooks.before_sample(0)
        fn()
        if hooks is not None:
            hooks.after_sample(0)
        self.measured += 1
        return Timing(2.0, statistics.stdev([1.0, 2.0, 4.0]), (1.0, 2.0, 4.0), self.name)

    def describe(self):
        return {"engine": self.name}


S1 = Shape("s1", M=16, N=24, K=8)
S2 = Shape("s2", M=8, N=8, K=32)
BOOM = Shape("boom", M=8, N=8, K=8)


def _csv(tmp_path, adapter, shapes, engine, schema=GEMM):
    log = io.StringIO()
    results = run_harness(adapter, shapes, engine, log=log)
    path = tmp_path / "bench.csv"
    write_csv(path, schema, [result_cells(schema, adapter, r) for r in results])
    return read_csv(path, expected=schema), log.getvalue()


def test_passing_shape_gets_a_pass_row_with_positive_tflops(tmp_path):
    table, log = _csv(tmp_path, GoodGemm(), [S1], PerfCounterEngine(**FAST))
    (row,) = table.rows
    assert (row.label, row.B, row.M, row.N, row.K, row.check) == ("s1", 1, 16, 24, 8, "PASS")
    assert row.fwd > 0 and row.fwd_ms > 0 and row.fwd_std >= 0
    assert row.fwd == pytest.approx(2 * 16 * 24 * 8 / (row.fwd_ms * 1e-3) / 1e12, rel=1e-4)
    assert row.snr["out_snr"] > SNR_FP32
    assert math.isnan(row.bwd) and math.isnan(row.bwd_ms)  # forward-only
    assert math.isnan(row.snr["da_snr"]) and math.isnan(row.snr["db_snr"])
    assert "s1: PASS fwd" in log


def test_rate_and_stddev_come_from_the_timing_samples(tmp_path):
    table, _ = _csv(tmp_path, GoodGemm(), [S1], FixedEngine())
    row = table.rows[0]
    flops = 2.0 * 16 * 24 * 8
    assert row.fwd == pytest.approx(flops / 2e-3 / 1e12, rel=1e-5)  # median 2 ms
    rates = [flops / (ms * 1e-3) / 1e12 for ms in (1.0, 2.0, 4.0)]
    assert row.fwd_std == pytest.approx(statistics.stdev(rates), rel=1e-5)
    assert row.fwd_ms == 2.0


def test_forward_that_raises_is_a_fail_row_and_the_next_shape_still_runs(tmp_path):
    ad = ExplodingGemm()
    table, log = _csv(tmp_path, ad, [BOOM, S1], PerfCounterEngine(**FAST))
    boom, s1 = table.rows
    assert (boom.label, boom.check) == ("boom", "FAIL")
    assert math.isnan(boom.fwd) and math.isnan(boom.snr["out_snr"])
    assert (s1.label, s1.check) == ("s1", "PASS") and s1.fwd > 0
    assert "boom: FAIL" in log and "RuntimeError: kernel exploded" in log
    assert "Traceback" in log


def test_wrong_result_fails_with_its_snr_and_is_not_timed(tmp_path):
    ad = WrongGemm()
    eng = FixedEngine()
    table, log = _csv(tmp_path, ad, [S1], eng)
    row = table.rows[0]
    assert row.check == "FAIL"
    assert row.snr["out_snr"] == pytest.approx(20.0, abs=0.01)
    assert math.isnan(row.fwd) and math.isnan(row.fwd_ms)
    assert ad.forward_calls == {"s1": 1}  # only the correctness call
    assert eng.measured == 0
    assert "out: SNR 20.00 dB < 80.0 dB" in log


def test_a_correct_shape_is_timed_after_the_check():
    ad, eng = GoodGemm(), FixedEngine()
    r = run_shape(ad, S1, eng, seed=0, device="cpu")
    assert r.passed and r.fwd is not None and r.bwd is None
    assert eng.measured == 1 and ad.forward_calls == {"s1": 2}


def test_backward_is_checked_and_timed(tmp_path):
    table, _ = _csv(tmp_path, GradGemm(), [S1], FixedEngine())
    row = table.rows[0]
    assert row.check == "PASS"
    assert row.bwd == pytest.approx(4.0 * 16 * 24 * 8 / 2e-3 / 1e12, rel=1e-5)
    assert row.bwd_ms == 2.0 and row.bwd_std > 0
    assert row.snr["da_snr"] > SNR_FP32 and row.snr["db_snr"] > SNR_FP32


def test_memory_schema_writes_gb_per_s_from_bytes_moved(tmp_path):
    shape = Shape("r", M=64, N=32, B=2)
    table, _ = _csv(tmp_path, Copy(), [shape], FixedEngine(), schema=MEMORY)
    assert table.schema.name == "memory"
    row = table.rows[0]
    assert (row.label, row.B, row.M, row.N, row.check) == ("r", 2, 64, 32, "PASS")
    nbytes = 2.0 * 4 * 2 * 64 * 32
    assert row.fwd == pytest.approx(nbytes / 2e-3 / 1e9, rel=1e-5)
    assert row.snr == {"out_snr": math.inf}
    assert math.isnan(row.bwd)


# ---- main(): what a generated quick_test_bench.py calls -----------------------------------


def _main(tmp_path, *argv, adapter="GoodGemm", schema="gemm", shapes=None, target=None):
    csv = tmp_path / "out.csv"
    rc = main(
        ["--summary-csv", str(csv), "--device", "cpu", *argv],
        adapter=f"{HERE}:{adapter}",
        schema=schema,
        shapes=[S1.to_dict()] if shapes is None else shapes,
        target_shapes=[S1.to_dict(), S2.to_dict()] if target is None else target,
        engine="perf_counter",
        engine_params=FAST,
    )
    return rc, csv


def test_main_quick_level_runs_the_representative_shapes(tmp_path):
    rc, csv = _main(tmp_path)
    assert rc == 0
    assert [r.label for r in read_csv(csv, expected=GEMM).rows] == ["s1"]


def test_main_full_level_runs_the_target_shapes(tmp_path):
    rc, csv = _main(tmp_path, "--level", "full")
    assert rc == 0
    rows = read_csv(csv, expected=GEMM).rows
    assert [r.label for r in rows] == ["s1", "s2"]
    assert all(r.passed for r in rows)


def test_main_only_filters_shapes(tmp_path):
    rc, csv = _main(tmp_path, "--level", "full", "--only", "s2")
    assert rc == 0
    assert [r.label for r in read_csv(csv).rows] == ["s2"]


def test_main_fail_rows_still_exit_zero(tmp_path):
    rc, csv = _main(tmp_path, adapter="WrongGemm")
    assert rc == 0
    assert [r.check for r in read_csv(csv).rows] == ["FAIL"]


def test_main_keeps_why_each_shape_failed_beside_its_csv(tmp_path):
    """The CSV says FAIL; the file beside it says why, one line per failing shape."""
    _, csv = _main(tmp_path, "--level", "full", adapter="WrongGemm")
    reasons = failures.read(csv)
    assert sorted(reasons) == ["s1", "s2"]
    assert all("SNR" in why and "\n" not in why for why in reasons.values()), reasons
    _, csv = _main(tmp_path, "--level", "full")
    assert failures.read(csv) == {}  # every shape passed


def test_a_failures_summary_groups_shapes_by_reason_and_cuts_long_ones(tmp_path):
    long = "CheatDetected: " + "x" * 400
    got = failures.summary({"big": long, "odd": long, "m1": "out SNR 12.0 dB < 80.0"})
    first, second = got.split("; ")
    assert first.startswith("big, odd: CheatDetected: ") and first.endswith("...")
    assert len(first) == len("big, odd: ") + failures.QUOTED
    assert second == "m1: out SNR 12.0 dB < 80.0"
    assert failures.read(tmp_path / "none.csv") == {} and failures.summary({}) == ""


def test_main_without_shapes_exits_2_and_writes_nothing(tmp_path, capsys):
    rc, csv = _main(tmp_path, shapes=[])
    assert rc == 2 and not csv.exists()
    assert "ratchet baseline" in capsys.readouterr().err
    rc, csv = _main(tmp_path, "--level", "full", "--only", "nope")
    assert rc == 2 and not csv.exists()


def test_main_adapter_schema_mismatch_exits_2(tmp_path, capsys):
    rc, csv = _main(tmp_path, adapter="Copy", schema="gemm")
    assert rc == 2 and not csv.exists()
    assert "'memory'" in capsys.readouterr().err


def test_main_unimportable_adapter_exits_2_with_the_reason(tmp_path, capsys):
    rc, csv = _main(tmp_path, adapter="NoSuchAdapter")
    assert rc == 2 and not csv.exists()
    assert "NoSuchAdapter" in capsys.readouterr().err


def test_main_memory_adapter_writes_memory_csv(tmp_path):
    shape = Shape("r", M=32, N=32).to_dict()
    rc, csv = _main(tmp_path, adapter="Copy", schema="memory", shapes=[shape])
    assert rc == 0
    t = read_csv(csv, expected=MEMORY)
    assert t.rows[0].check == "PASS" and t.rows[0].fwd > 0


class RightAtTheCheck(GradGemm):
    """Right for the correctness check, then zeros from the timed calls of ``wrong_phase``."""

    def __init__(self, wrong_phase: str) -> None:
        super().__init__()
        self.wrong_phase, self.checked = wrong_phase, False

    def outputs(self, case: Any) -> dict[str, torch.Tensor]:
        got = super().outputs(case)
        self.checked = True
        return got

    def forward(self, case: Any) -> torch.Tensor:
        out = super().forward(case)
        return torch.zeros_like(out) if self.checked and self.wrong_phase == "fwd" else out

    def backward(self, case: Any) -> Any:
        da, db = super().backward(case)
        if self.checked and self.wrong_phase == "bwd":
            return torch.zeros_like(da), db
        return da, db


@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_timed_calls_that_stop_computing_after_the_check_fail_the_shape(phase):
    """The harness compares what the last timed call returned with the check's reference: an
    op right at the check and wrong (or idle) in the timed calls gets no numbers."""
    r = run_shape(RightAtTheCheck(phase), S1, FixedEngine(), seed=0, device="cpu")
    assert not r.passed and r.fwd is None and r.bwd is None
    assert f"the {phase} timed calls did not compute the checked result" in r.reason
    assert ("da" if phase == "bwd" else "out") in r.reason
    honest = run_shape(GradGemm(), S1, FixedEngine(), seed=0, device="cpu")
    assert honest.passed and honest.bwd is not None


class KeptStale(GoodGemm):
    """Computes into a kept buffer once, then returns the buffer without writing it."""

    def __init__(self) -> None:
        super().__init__()
        self.buf: torch.Tensor | None = None

    def forward(self, case: Any) -> torch.Tensor:
        out = super().forward(case)
        if self.buf is None:
            self.buf = out.clone()
        return self.buf


def test_a_timed_call_that_returns_a_stale_buffer_keeps_the_poison_and_fails():
    """The harness poisons the outputs between samples, as the workers do: a buffer returned
    without being written still holds NaN after the sample."""
    eng = PerfCounterEngine(warmup=1, samples=2, min_sample_ms=0.1, max_batch=2)
    r = run_shape(KeptStale(), S1, eng, seed=0, device="cpu")
    assert not r.passed and "still hold the NaN poison" in r.reason, r.reason
    assert run_shape(GoodGemm(), S1, eng, seed=0, device="cpu").passed
