"""The parts of an exhaustive sweep (:mod:`kernel_ratchet.optimizers.sweep`): the grid of one
entry's configurations, putting a configuration in force in the running process, measuring it
on the sweep's shapes, and scoring every combination of the entries' measured configurations.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import itertools
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from kernel_ratchet.harness import inplace
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.csv_schema import csv_text, parse_csv_text
from kernel_ratchet.harness.runtime import RestoreEachCall, ShapeResult, result_cells
from kernel_ratchet.harness.timing.engine import Timing
from kernel_ratchet.optimizers.base import OptimizerError
from kernel_ratchet.scoring.metrics import aggregates

PHASES = ("fwd", "bwd", "both")
#: Samples per timed phase on the GPU: the harness's ``GPU_TIMING`` with 5 samples of ~50 ms
#: instead of 10 (a sweep measures hundreds of configurations; the paired comparison of
#: :mod:`kernel_ratchet.optimizers.sweep_compare` is the number quoted, not a sweep's single
#: measurement).
SWEEP_SAMPLES = 5

_DEFS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)


def grid(space: Mapping[str, list], knobs: list[str]) -> list[dict[str, Any]]:
    """Every combination of ``knobs`` over ``space``. Raises OptimizerError naming a knob that
    is not in the space."""
    missing = [k for k in knobs if k not in space]
    if missing:
        raise OptimizerError(f"knobs {missing} are not in the entry's search space {sorted(space)}")
    return [
        dict(zip(knobs, vals, strict=True))
        for vals in itertools.product(*(space[k] for k in knobs))
    ]


def parse_entries(specs: list[str], has_backward: bool) -> dict[str, str]:
    """``ENTRY[=PHASE]`` -> {entry: phase}. Raises OptimizerError unless each timed phase is
    governed by exactly one entry and every phase is one of :data:`PHASES`."""
    out: dict[str, str] = {}
    for spec in specs:
        entry, _, phase = spec.partition("=")
        phase = phase or "both"
        if phase not in PHASES:
            raise OptimizerError(f"--entry {spec}: the phase must be one of {PHASES}")
        out[entry] = phase
    for ph in ("fwd", "bwd") if has_backward else ("fwd",):
        owners = [e for e, p in out.items() if p in (ph, "both")]
        if len(owners) != 1:
            raise OptimizerError(
                f"the {ph} phase must be governed by exactly one --entry (ENTRY="
                f"{ph} or ENTRY=both), got {owners or 'none'}"
            )
    return out


def module_name(root: Path, path: Path) -> str:
    """The dotted module name of the file ``path`` under the import root ``root``."""
    rel = path.resolve().relative_to(root.resolve()).with_suffix("")
    return ".".join(rel.parts)


def apply_text(module: ModuleType, text: str, filename: str) -> None:
    """Put a tunables text in force in the imported ``module``.

    Its top-level statements other than imports, classes and functions (the assignments a
    search edits) run in the module's namespace, so code that looks the configuration up
    through the module's globals sees it at the next call, and the values are instances of the
    module's own classes (re-running a class statement would make a new class that ``==`` and
    ``isinstance`` elsewhere do not know). Raises OptimizerError when the text changes a class,
    a function or an import: a sweep varies values only.
    """
    tree = ast.parse(text, filename)
    source = Path(module.__file__).read_text()
    defs = [ast.dump(n) for n in tree.body if isinstance(n, _DEFS)]
    if defs != [ast.dump(n) for n in ast.parse(source).body if isinstance(n, _DEFS)]:
        raise OptimizerError(
            f"{filename}: the text changes code, not only values; a sweep cannot "
            "put it in force in a running process"
        )
    tree.body = [n for n in tree.body if not isinstance(n, _DEFS)]
    flags = __future__.annotations.compiler_flag
    exec(compile(tree, filename, "exec", flags=flags, dont_inherit=True), module.__dict__)  # noqa: S102


def evenly(shapes: list[Shape], n: int) -> list[Shape]:
    """``n`` shapes spread evenly over ``shapes`` (all of them when there are at most ``n``)."""
    if n >= len(shapes):
        return shapes
    step = (len(shapes) - 1) / max(n - 1, 1)
    return [shapes[round(i * step)] for i in range(n)]


def timing_dict(t: Timing | None) -> dict[str, Any] | None:
    """The JSON form of one timing (None stays None)."""
    if t is None:
        return None
    return {"median_ms": t.median_ms, "stddev_ms": t.stddev_ms, "samples_ms": list(t.samples_ms)}


def _timing(d: Mapping[str, Any] | None, engine: str) -> Timing | None:
    if d is None:
        return None
    return Timing(d["median_ms"], d["stddev_ms"], tuple(d["samples_ms"]), engine)


def _time_phases(
    adapter: Any, case: Any, engine: Any, phase: str, kept: inplace.InPlace | None
) -> dict[str, Any]:
    """The timed phases of one shape; an op with in-place outputs has its kept values written
    back before every timed call (their own time subtracted), as in the harness."""
    hooks = RestoreEachCall(kept, case) if kept else None
    fwd = bwd = None
    if phase in ("fwd", "both"):
        fwd = timing_dict(engine.measure(lambda: adapter.forward(case), hooks))
    if phase in ("bwd", "both") and adapter.has_backward:
        bwd = timing_dict(engine.measure(lambda: adapter.backward(case), hooks))
    return {"fwd": fwd, "bwd": bwd}


def measure_config(
    adapter: Any, shapes: list[Shape], engine: Any, phase: str, device: str, cases: dict
) -> dict[str, Any]:
    """{label: {"snr", "fwd", "bwd"}} of the configuration in force (correctness checked first
    on every shape, only ``phase`` timed), or {"error": why, "trace": ...}: a configuration
    that fails is a result, not an exception. ``cases`` caches each shape's inputs and
    reference across configurations (seed 0; the reference does not depend on the
    configuration; an op's in-place fields are written back before each configuration)."""
    out = {}
    for shape in shapes:
        try:
            if shape.label not in cases:
                case = adapter.make_case(shape, 0, device)
                kept = inplace.prepared(adapter, case)
                cases[shape.label] = (case, inplace.reference(adapter, case, kept), kept)
            case, ref, kept = cases[shape.label]
            if kept:  # an op with in-place outputs changed the case: its inputs as built
                kept.restore(case)
            got = adapter.outputs(case)
            check = check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})
            del got
            if not check.passed:
                return {"error": f"{shape.label}: check failed: {check.reason}"}
            timed = _time_phases(adapter, case, engine, phase, kept)
            out[shape.label] = {"snr": check.snr, **timed}
        except Exception as exc:  # noqa: BLE001 - a configuration that fails is a result
            tb = traceback.format_exc(limit=3)
            return {"error": f"{shape.label}: {type(exc).__name__}: {exc}"[:300], "trace": tb}
    return out


def score(
    adapter: Any,
    schema: Any,
    shapes: list[Shape],
    campaign_type: str,
    parts: Mapping[str, Mapping[str, Any]],
    engine: str,
) -> float:
    """Primary aggregate of one combination: ``parts`` maps each phase to its measured shapes."""
    rows = []
    for s in shapes:
        fwd = _timing(parts["fwd"][s.label]["fwd"], engine)
        bwd = _timing(parts["bwd"][s.label]["bwd"], engine) if "bwd" in parts else None
        snr = parts["fwd"][s.label]["snr"]
        rows.append(result_cells(schema, adapter, ShapeResult(s, True, "", snr, fwd, bwd)))
    return aggregates(parse_csv_text(csv_text(schema, rows)), campaign_type).primary_avg


def combine(
    entries: Mapping[str, str],
    measured: Mapping[str, list[dict]],
    score_fn: Callable[[dict[str, Any]], float],
) -> list[dict[str, Any]]:
    """Every combination of the entries' measured configurations, scored, best first."""
    ok = {e: [r for r in rows if "shapes" in r] for e, rows in measured.items()}
    combos = []
    for picks in itertools.product(*(ok[e] for e in entries)):
        by_phase = {}
        for e, r in zip(entries, picks, strict=True):
            for ph in ("fwd", "bwd") if entries[e] == "both" else (entries[e],):
                by_phase[ph] = r["shapes"]
        combos.append(
            {
                "configs": {e: r["config"] for e, r in zip(entries, picks, strict=True)},
                "aggregate": score_fn(by_phase),
            }
        )
    combos.sort(key=lambda c: -c["aggregate"])
    return combos


def previous(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, list[dict]]:
    """The measured rows of an earlier run of the same sweep (same op, entries, knobs,
    shapes). Raises OptimizerError when it was another sweep."""
    same = ("op", "entries", "knobs", "shapes")
    differ = [k for k in same if old.get(k) != new.get(k)]
    if differ:
        raise OptimizerError(
            f"--resume: the existing output is another sweep (differs in {differ})"
        )
    return {e: list(rows) for e, rows in old.get("measured", {}).items()}


def load_module(root: Path, path: Path) -> ModuleType:
    """Import the tunables file ``path`` of the project at ``root`` as the kernels import it."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(module_name(root, path))
