"""The quick-harness runtime that every generated ``quick_test_bench.py`` calls.

For each shape, in order: build a fresh case, run the op and compare every output with the
reference (correctness first); only a passing shape is timed (forward, then backward when the
op has one). A shape that raises or fails its check still gets a row, with Check=FAIL and the
reason on stderr. The summary CSV is written in the adapter's frozen schema.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness import failures, inplace, launches
from kernel_ratchet.harness.adapter import Adapter, Shape, load_adapter
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.csv_schema import Schema, get_schema, write_csv
from kernel_ratchet.harness.level_timing import level_params
from kernel_ratchet.harness.start_gate import wait_for_start
from kernel_ratchet.harness.timing.engine import SampleHooks, Timing, TimingEngine
from kernel_ratchet.harness.timing.registry import make_engine


@dataclass
class ShapeResult:
    """What the harness learned about one shape."""

    shape: Shape
    passed: bool
    reason: str
    snr: dict[str, float] = field(default_factory=dict)
    fwd: Timing | None = None
    bwd: Timing | None = None
    launched: tuple[str, ...] = ()  # the Triton kernels the checked call launched
    # per kernel, the scalar arguments of its launches in the checked call
    launch_args: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _rate(work: float, t: Timing | None, scale: float) -> tuple[float, float]:
    """(median rate, stddev of per-sample rates) for ``work`` units per call; NaN if untimed."""
    if t is None or work <= 0 or t.median_ms <= 0:
        return math.nan, math.nan
    rates = [work / (s * 1e-3) / scale for s in t.samples_ms if s > 0]
    mean = sum(rates) / len(rates)
    std = (sum((r - mean) ** 2 for r in rates) / max(len(rates) - 1, 1)) ** 0.5
    return work / (t.median_ms * 1e-3) / scale, std


class _Poison(SampleHooks):
    """The harness's NaN poison: the last call's outputs are NaN-filled before every sample and
    must not hold NaN after it (an op that returned a result without computing it, or a graph
    that replays without the op's work). Not for ops with in-place outputs (their outputs are
    inputs)."""

    def __init__(self, last: list[Any], what: str) -> None:
        self.last, self.what = last, what

    def before_sample(self, index: int) -> None:
        from kernel_ratchet.harness import anticheat as ac

        if self.last[0] is not None:
            ac.poison(ac.output_tensors(self.last[0], self.what))

    def after_sample(self, index: int) -> None:
        from kernel_ratchet.harness import anticheat as ac

        ac.require_rewritten(ac.output_tensors(self.last[0], self.what), self.what, index)


class RestoreEachCall(SampleHooks):
    """For an op with in-place outputs: its fields written back before every timed call (the
    engine's prelude, its own time subtracted), so every call starts from the inputs the check
    saw, as in the workers, not from results of results."""

    def __init__(self, kept: inplace.InPlace, case: Any) -> None:
        self.kept, self.case = kept, case

    def prelude(self) -> None:
        self.kept.restore(self.case)


def _timed(
    adapter: Adapter,
    case: Any,
    engine: TimingEngine,
    phase: str,
    ref: dict[str, Any],
    kept: inplace.InPlace | None = None,
) -> tuple[Timing, str | None]:
    """Time one phase (its outputs NaN-poisoned between samples), then compare what its last
    timed call returned with the reference of the check (same inputs): (timing, why the timed
    calls did not compute it, or None). An op with in-place outputs (``kept``) changes its
    inputs on every call: each call starts from the kept values, and it is neither poisoned
    nor compared; outputs the adapter does not name are not
    compared. Raises CheatDetected when a sample left the poison in place."""
    from kernel_ratchet.harness import anticheat as ac
    from kernel_ratchet.harness.timed_checks import checked_outputs

    call = adapter.backward if phase == "bwd" else adapter.forward
    last: list[Any] = [None]

    def fn() -> Any:
        last[0] = call(case)
        return last[0]

    what = f"{phase} timed call"
    timing = engine.measure(fn, RestoreEachCall(kept, case) if kept else _Poison(last, what))
    if kept or last[0] is None:
        return timing, None
    outs = ac.output_tensors(last[0], what)
    pairs = checked_outputs(adapter, case, outs, ref, phase)
    if not pairs:
        return timing, None
    thresholds = {n: adapter.threshold(n) for n in pairs}
    res = check_outputs(pairs, {n: ref[n] for n in pairs}, thresholds)
    if res.passed:
        return timing, None
    return timing, (
        f"the {phase} timed calls did not compute the checked result ({res.reason}): an output "
        "right at the check but not in the timed calls"
    )


def run_shape(
    adapter: Adapter, shape: Shape, engine: TimingEngine, *, seed: int, device: str
) -> ShapeResult:
    """Check then time one shape. Never raises for a failing candidate: the row says FAIL."""
    try:
        case = adapter.make_case(shape, seed, device)
        kept = inplace.prepared(adapter, case)
        with launches.recording() as names:
            got = adapter.outputs(case)
        ref = inplace.reference(adapter, case, kept)
        thresholds = {name: adapter.threshold(name) for name in ref}
        check = check_outputs(got, ref, thresholds)
        if not check.passed:
            return ShapeResult(shape, False, check.reason, check.snr)
        del got
        fwd, wrong = _timed(adapter, case, engine, "fwd", ref, kept)
        bwd = None
        if adapter.has_backward and not wrong:
            bwd, wrong = _timed(adapter, case, engine, "bwd", ref, kept)
        if wrong:
            return ShapeResult(shape, False, wrong, check.snr)
        return ShapeResult(
            shape, True, check.reason, check.snr, fwd, bwd, tuple(sorted(names)), names.arg_sets()
        )
    except Exception as exc:  # a failing candidate is a recorded outcome, not a crash
        tb = traceback.format_exc(limit=6)
        return ShapeResult(shape, False, f"{type(exc).__name__}: {exc}\n{tb}")


def result_cells(schema: Schema, adapter: Adapter, r: ShapeResult) -> list[Any]:
    """One CSV row in the schema's column order."""
    s = r.shape
    if schema.name == "gemm":
        work, scale = adapter.flops(s), 1e12
    else:
        work, scale = adapter.bytes_moved(s), 1e9
    fwd, fwd_std = _rate(work[0], r.fwd, scale)
    bwd, bwd_std = _rate(work[1], r.bwd, scale)
    fwd_ms = r.fwd.median_ms if r.fwd else math.nan
    bwd_ms = r.bwd.median_ms if r.bwd else math.nan
    snr = [_snr(adapter, r.snr, c.removesuffix("_snr")) for c in schema.snr_columns]
    check = "PASS" if r.passed else "FAIL"
    dims = [s.B, s.M, s.N, s.K] if schema.name == "gemm" else [s.B, s.M, s.N]
    return [s.label, *dims, check, fwd, fwd_std, bwd, bwd_std, fwd_ms, bwd_ms, *snr]


def _snr(adapter: Adapter, snr: dict[str, float], name: str) -> float:
    """The SNR of CSV column ``<name>_snr``: ``out`` is the op's output, which an adapter that
    names its outputs (an op described in ratchet.yaml: ``y``, ``loss``) calls by its first
    name."""
    if name == "out" and "out" not in snr:
        names = adapter.returned_names("fwd") or ()
        name = names[0] if names else name
    return snr.get(name, math.nan)


def run_harness(
    adapter: Adapter,
    shapes: Sequence[Shape],
    engine: TimingEngine,
    *,
    seed: int = 0,
    device: str = "cpu",
    log=sys.stderr,
) -> list[ShapeResult]:
    results = []
    for shape in shapes:
        r = run_shape(adapter, shape, engine, seed=seed, device=device)
        status = "PASS" if r.passed else "FAIL"
        t = f" fwd {r.fwd.median_ms:.4f} ms" if r.fwd else ""
        t += f" bwd {r.bwd.median_ms:.4f} ms" if r.bwd else ""
        first = (r.reason.splitlines() or [""])[0]
        print(f"[harness] {shape.label}: {status}{t} ({first})", file=log)
        if not r.passed and "\n" in r.reason:
            print(r.reason, file=log)
        results.append(r)
    return results


def _write_beside(csv: Path, results: Sequence[ShapeResult]) -> None:
    """The files beside the CSV: the kernels each passing shape launched, with each launch's
    scalar arguments, and why each failing shape failed."""
    passed = [r for r in results if r.passed]
    launches.write(csv.with_name(launches.FILE), {r.shape.label: r.launched for r in passed})
    args = {r.shape.label: r.launch_args for r in passed}
    launches.write_args(csv.with_name(launches.ARGS_FILE), args)
    failures.write(csv, {r.shape.label: r.reason for r in results if not r.passed})


def main(
    argv: Sequence[str],
    *,
    adapter: str,
    schema: str,
    shapes: Sequence[dict],
    target_shapes: Sequence[dict],
    engine: str,
    engine_params: dict[str, Any],
    seed: int = 0,
    quick_params: dict[str, Any] | None = None,
) -> int:
    """Entry point of a generated quick_test_bench.py.

    ``--level quick`` runs SHAPES (the representative set) with ``quick_params`` over the
    timing parameters (:func:`~kernel_ratchet.harness.level_timing.level_params`), ``--level
    full`` TARGET_SHAPES.
    Exit code 0 when the CSV was written (even with FAIL rows: the decision is the tool's),
    2 when nothing could be measured (no shapes, adapter not importable).
    """
    p = argparse.ArgumentParser(description="kernel-ratchet quick validation harness")
    p.add_argument("--summary-csv", required=True, help="where to write the benchmark CSV")
    p.add_argument("--level", choices=("quick", "full"), default="quick")
    p.add_argument("--seed", type=int, default=seed)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--only", default="", help="comma-separated shape labels to run")
    args = p.parse_args(list(argv))
    chosen = [Shape.from_dict(d) for d in (shapes if args.level == "quick" else target_shapes)]
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [s for s in chosen if s.label in wanted]
    if not chosen:
        print(f"[harness] no shapes at level {args.level}; run `ratchet baseline`", file=sys.stderr)
        return 2
    try:
        ad = load_adapter(adapter)
        sch = get_schema(schema)
        if ad.schema != sch.name:
            print(
                f"[harness] adapter writes schema {ad.schema!r}, campaign froze {sch.name!r}",
                file=sys.stderr,
            )
            return 2
        params = level_params(engine_params, args.level, quick_params)
        params.setdefault("device", args.device)
        eng = make_engine(engine, params)
    except RatchetError as exc:  # nothing can be measured: say why, exit 2 as documented
        print(f"[harness] {exc}", file=sys.stderr)
        return 2
    if not wait_for_start():  # prepared beside the focused test; measure after it
        return 2
    results = run_harness(ad, chosen, eng, seed=args.seed, device=args.device)
    write_csv(args.summary_csv, sch, [result_cells(sch, ad, r) for r in results])
    _write_beside(Path(args.summary_csv), results)
    meta = {"engine": eng.describe(), "seed": args.seed, "level": args.level}
    print("[harness] " + json.dumps(meta), file=sys.stderr)
    return 0
