"""Which path an FP8 Linear takes on a shape: FP8, or the 16-bit path where FP8 measured slower.

FP8 pays when the GEMMs dominate; on small or skinny problems the quantization passes (the
whole weight is read and written again each step) and the per-k-group scaling can cost more
than the halved GEMM time saves. Where that happens is measured, not guessed: the table
``fp8_dispatch.json`` next to this module holds, per recipe granularity, step times (forward +
backward, quantization included) of the FP8 Linear and of the 16-bit Linear on a set of shapes.
It is written by::

    python -m kernel_ratchet.kernels.gemm.bench --set dispatch --fill-dispatch \
        kernel_ratchet/kernels/gemm/fp8_dispatch.json

Rule (:meth:`DispatchTable.path_for`): the measured shape nearest to the call's, by distance
of ``log2 M``, ``log2 N``, ``log2 K`` (each axis counts fully), decides when it lies within
:data:`MAX_DISTANCE`; it sends the call to the 16-bit path when its FP8 step was slower than
the 16-bit step. With no measured shape near, or an empty table, the call keeps FP8 (what the
caller asked for).

One timing per path can mislead where the two paths are close or the FP8 step varies from
moment to moment, so a fill times each cell as the median of interleaved rounds (3 unless
``--rounds`` says otherwise), and runs can be merged (``--fill-dispatch PATH --merge``, same
GPU, driver, torch and triton): a merged row keeps its slowest FP8 step and its fastest
16-bit step over the runs, so a shape goes to FP8 only where FP8 was faster in every run.

Where FP8 pays depends on the GPU. A run on another GPU than the table's merges into a section
of its own (``by_gpu``, keyed by ``torch.cuda.get_device_name()``), and a call reads the
section of the GPU it runs on (the process's first GPU), else the table's own rows.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

#: The shipped table.
TABLE_PATH = Path(__file__).with_name("fp8_dispatch.json")
#: Farthest measured shape that still decides (sum of |log2| differences: 1.0 is a factor of 2
#: along one axis).
MAX_DISTANCE = 1.0
PATHS = ("fp8", "bf16")
#: What two runs must share to be merged into one table.
_SAME_RUN_KEYS = ("gpu", "driver", "torch", "triton")


@dataclass(frozen=True)
class Measured:
    """One measured shape: step times in milliseconds of both paths."""

    granularity: str
    M: int
    N: int
    K: int
    fp8_step_ms: float
    bf16_step_ms: float
    #: how many runs were merged into this row (its FP8 time the slowest, 16-bit the fastest)
    runs: int = 1

    @property
    def faster(self) -> str:
        return "fp8" if self.fp8_step_ms <= self.bf16_step_ms else "bf16"

    def distance(self, M: int, N: int, K: int) -> float:
        return sum(
            abs(math.log2(max(x, 1)) - math.log2(max(y, 1)))
            for x, y in ((self.M, M), (self.N, N), (self.K, K))
        )


@dataclass(frozen=True)
class DispatchTable:
    """The measured shapes and how they were measured (``info``: device, versions, command;
    ``merged``: the commands of the runs merged in after it, ``;``-separated)."""

    rows: tuple[Measured, ...] = ()
    info: dict[str, str] = field(default_factory=dict)
    #: the tables of runs on other GPUs, by GPU name (see the module doc)
    by_gpu: Mapping[str, DispatchTable] = field(default_factory=dict)

    def for_gpu(self, gpu: str | None) -> DispatchTable:
        """The table a call on ``gpu`` reads: that GPU's section, else this table's rows."""
        return self.by_gpu.get(gpu, self) if gpu else self

    def nearest(self, granularity: str, M: int, N: int, K: int) -> Measured | None:
        same = [r for r in self.rows if r.granularity == granularity]
        best = min(same, key=lambda r: r.distance(M, N, K), default=None)
        return best if best is not None and best.distance(M, N, K) <= MAX_DISTANCE else None

    def path_for(self, granularity: str, M: int, N: int, K: int) -> str:
        """``"fp8"`` or ``"bf16"`` for an ``[M, K] x [N, K]ᵀ`` Linear (see the module doc)."""
        near = self.nearest(granularity, M, N, K)
        return "fp8" if near is None else near.faster

    def merged(self, run: DispatchTable, combine: Combine | None = None) -> DispatchTable:
        """This table with another run merged in: into its own rows where the run was measured
        on this table's GPU, else into that GPU's section (see the module doc). ``combine``
        makes one row of rows measured at one place (default :func:`merge_runs`). Raises
        ValueError where the run's driver, torch or triton differ from the rows it joins."""
        combine = combine or merge_runs
        gpu = run.info.get("gpu")
        if not self.rows and not self.by_gpu:  # an empty table was measured nowhere
            return replace(run, rows=combine(run.rows))
        if gpu and self.info.get("gpu") not in (None, gpu):
            own = self.by_gpu.get(gpu)
            section = own._joined(run, combine) if own else replace(run, rows=combine(run.rows))
            return replace(self, by_gpu={**self.by_gpu, gpu: section})
        return self._joined(run, combine)

    def _joined(self, run: DispatchTable, combine: Combine) -> DispatchTable:
        for key in _SAME_RUN_KEYS:
            if self.info.get(key) != run.info.get(key):
                raise ValueError(
                    f"cannot merge dispatch tables measured with different {key}: "
                    f"{self.info.get(key)!r} in the table, {run.info.get(key)!r} in this run; "
                    "write this run to a new table (without --merge) instead"
                )
        later = [c for c in (self.info.get("merged"), run.info.get("command", "?")) if c]
        info = {**self.info, "merged": " ; ".join(later)}
        return replace(self, rows=combine((*self.rows, *run.rows)), info=info)

    def body(self) -> dict:
        out: dict = {"info": self.info, "rows": [asdict(r) for r in self.rows]}
        if self.by_gpu:
            out["by_gpu"] = {gpu: t.body() for gpu, t in self.by_gpu.items()}
        return out

    def to_json(self) -> str:
        return json.dumps(self.body(), indent=1) + "\n"


#: How rows measured at one place become one row (:meth:`DispatchTable.merged`).
Combine = Callable[[Sequence[Measured]], tuple[Measured, ...]]


def collapse(
    rows: Sequence[Measured], join: Callable[[Measured, Measured], Measured]
) -> tuple[Measured, ...]:
    """One row per (granularity, M, N, K): rows sharing one joined in order by ``join`` (the
    kept row and the next), their runs added up."""
    kept: dict[tuple[str, int, int, int], Measured] = {}
    for r in rows:
        key = (r.granularity, r.M, r.N, r.K)
        old = kept.get(key)
        kept[key] = r if old is None else replace(join(old, r), runs=old.runs + r.runs)
    return tuple(kept.values())


def merge_runs(rows: Sequence[Measured]) -> tuple[Measured, ...]:
    """One row per shape: the slowest FP8 step and the fastest 16-bit step of the rows (runs)
    measured there, their runs added up (a shape measured twice in one run counts twice)."""
    return collapse(
        rows,
        lambda a, b: replace(
            b,
            fp8_step_ms=max(a.fp8_step_ms, b.fp8_step_ms),
            bf16_step_ms=min(a.bf16_step_ms, b.bf16_step_ms),
        ),
    )


def write_run(
    path: Path, run: DispatchTable, merge: bool, combine: Combine | None = None, source: str = ""
) -> DispatchTable:
    """Write the table of one ``run`` to ``path``, with ``merge`` merged into the table there
    (:meth:`DispatchTable.merged`; ``source`` names that table in an error); the part of the
    written table the run's GPU reads. Raises ValueError for a table that cannot be read or
    cannot take the run."""
    table = run
    if merge and path.exists():
        table = parse_table(path.read_text(), source or str(path)).merged(run, combine)
    path.write_text(table.to_json())
    return table.for_gpu(run.info.get("gpu"))


def parse_table(text: str, source: str = "dispatch table") -> DispatchTable:
    """A table from its JSON text; raises ValueError naming the source and the bad row."""
    try:
        return _parsed(json.loads(text), source)
    except (json.JSONDecodeError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"{source}: not a dispatch table ({exc}); rewrite it with "
            "`python -m kernel_ratchet.kernels.gemm.bench --set dispatch --fill-dispatch PATH`"
        ) from exc


def _parsed(body: dict, source: str) -> DispatchTable:
    rows = tuple(Measured(**r) for r in body.get("rows", []))
    info = {str(k): str(v) for k, v in body.get("info", {}).items()}
    for r in rows:
        if min(r.M, r.N, r.K, r.runs) < 1 or not (r.fp8_step_ms > 0 and r.bf16_step_ms > 0):
            raise ValueError(f"{source}: row {asdict(r)} needs positive sizes, runs and times")
    sections = {str(g): _parsed(t, f"{source}, {g}") for g, t in body.get("by_gpu", {}).items()}
    return DispatchTable(rows, info, sections)


@functools.lru_cache(maxsize=4)
def load_table(path: Path = TABLE_PATH) -> DispatchTable:
    """The table at ``path`` (cached); an absent file is an empty table."""
    if not path.exists():
        return DispatchTable()
    return parse_table(path.read_text(), str(path))


@functools.cache
def this_gpu() -> str | None:
    """The name of the process's first GPU (the section of a table its calls read), or None."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def fp8_path(granularity: str, M: int, N: int, K: int) -> str:
    """The shipped table's decision for one call on this GPU."""
    return load_table().for_gpu(this_gpu()).path_for(granularity, M, N, K)


#: What a table's decisions depend on, as :func:`.compare.versions` names it.
_MEASURED_ON = ("gpu", "torch", "triton")


def measured_elsewhere(table: DispatchTable, here: dict[str, str], fill: str) -> str | None:
    """A line saying that ``table`` was measured on another GPU, torch or triton than ``here``
    (:func:`.compare.versions` of this run), so its decisions may not hold here, and how to
    write one that does (``fill``); None where they match, the table is empty, or this run has
    no GPU (it measures nothing the table could be compared with)."""
    table = table.for_gpu(here.get("gpu"))
    if not table.rows or "gpu" not in here:
        return None
    differ = [
        f"{k} {table.info.get(k, '?')} (here {here[k]})"
        for k in _MEASURED_ON
        if k in here and table.info.get(k) != here[k]
    ]
    if not differ:
        return None
    return (
        "the FP8 dispatch table was measured with " + ", ".join(differ) + ": its decisions "
        f"may not hold on this machine; measure this GPU's with `{fill} --merge` (a section "
        "of its own in that table) and let a round decide it"
    )
