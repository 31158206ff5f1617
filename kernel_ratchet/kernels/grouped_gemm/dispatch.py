"""Which path an FP8 grouped GEMM takes on a layer: FP8, or the bf16 path where FP8 measured
slower.

Each FP8 step quantizes the whole expert weight stack again (a bf16 read and two FP8 copies
written) unless the caller prepared it once per update, and the activations and gradients in
both directions. Where the tokens per expert are few against the weight, those passes cost
more than the halved GEMM time saves, and the FP8 step is slower than the bf16 one. Where that
happens is measured, not guessed: ``fp8_dispatch.json`` next to this module holds step times
(forward + backward, quantization included) of our FP8 and bf16 grouped GEMMs per layer,
written on the GPU by::

    python -m kernel_ratchet.kernels.grouped_gemm.bench --step --shapes moe_target,moe_offlist \\
        --prepared-weight --fill-dispatch kernel_ratchet/kernels/grouped_gemm/fp8_dispatch.json

A layer is placed by its tokens per expert (``T / G``: the weight passes scale with G, the
GEMMs with T), N and K, and the rule is the dense Linear's (:mod:`..gemm.dispatch`): the
measured layer nearest by ``log2`` distance decides within ``MAX_DISTANCE``, to bf16 where its
FP8 step was slower; no measured layer near, or no table, keeps FP8. A step with a prepared
weight (:mod:`.prepared_weight`) has rows of its own: without the weight's pass FP8 pays on
far fewer tokens. A run on another GPU merges into a section of its own, which calls on that
GPU read (:mod:`..gemm.dispatch`). Layers that share a place (the same layer under other
routings, or measured again by a run merged in with ``--merge``) leave one row: the
measurement least favourable to FP8, the lowest ratio of bf16 to FP8 step time, so FP8 is
kept only where it won on every one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from kernel_ratchet.kernels.gemm.dispatch import (
    DispatchTable,
    Measured,
    collapse,
    load_table,
    this_gpu,
    write_run,
)

#: The shipped table (empty or absent: every call keeps FP8).
TABLE_PATH = Path(__file__).with_name("fp8_dispatch.json")
#: Rows of a step that quantizes its weight, and of one given a prepared weight.
PER_CALL = "grouped_blockwise"
PREPARED = "grouped_blockwise_prepared"
#: What writes the table (named by a table that cannot be read).
FILL = "python -m kernel_ratchet.kernels.grouped_gemm.bench --step --fill-dispatch PATH"


def tokens_per_expert(tokens: int, experts: int) -> int:
    """The layer's place on the table's first axis: its tokens per expert, at least 1."""
    return max(1, round(tokens / max(experts, 1)))


def fp8_path(tokens: int, experts: int, N: int, K: int, prepared: bool = False) -> str:
    """``"fp8"`` or ``"bf16"`` for a grouped GEMM of ``tokens`` rows over ``experts`` weights
    of ``[N, K]``, by the shipped table. Raises ValueError for a table that cannot be read."""
    try:
        table = load_table(TABLE_PATH)
    except ValueError as exc:
        raise ValueError(f"{exc} (this table is written by `{FILL}`)") from exc
    granularity = PREPARED if prepared else PER_CALL
    return table.for_gpu(this_gpu()).path_for(granularity, tokens_per_expert(tokens, experts), N, K)


def measured_rows(layers: Iterable[tuple[int, int, int, int, dict[str, float]]]) -> list[Measured]:
    """Table rows from measured layers ``(tokens, experts, N, K, ms)``: ``ms`` holds the bf16
    step (``step``), the FP8 step (``fp8_step``) and, where timed, the FP8 step with a
    prepared weight (``fp8_prep``); a layer without finite positive times gives no row."""

    def ok(v: float | None) -> bool:
        return v is not None and math.isfinite(v) and v > 0

    rows = []
    for tokens, experts, N, K, ms in layers:
        t = tokens_per_expert(tokens, experts)
        if not ok(ms.get("step")):
            continue
        for granularity, key in ((PER_CALL, "fp8_step"), (PREPARED, "fp8_prep")):
            if ok(ms.get(key)):
                rows.append(Measured(granularity, t, N, K, ms[key], ms["step"]))
    return rows


def one_per_place(rows: Iterable[Measured]) -> tuple[Measured, ...]:
    """One row per (granularity, tokens per expert, N, K): of the rows sharing one, the lowest
    ratio of bf16 to FP8 step time, with their runs added up. Ratios, not times, compare: the
    same place under other routings takes other times on both paths."""
    return collapse(
        tuple(rows), lambda a, b: min(a, b, key=lambda x: x.bf16_step_ms / x.fp8_step_ms)
    )


def write_table(path: Path, rows: list[Measured], info: dict[str, str], merge: bool) -> int:
    """Write ``rows`` (measured with ``info``) to ``path``, merged into the table there with
    ``merge``, one row per place (:func:`one_per_place`); the row count of the part of the
    table this run's GPU reads (its section, where the table was measured elsewhere). Raises
    ValueError for a table that cannot be read or was measured on other hardware or software."""
    run = DispatchTable(one_per_place(rows), info)
    source = f"{path} (written by `{FILL}`)"
    return len(write_run(path, run, merge, one_per_place, source).rows)


def fill(rows: Iterable, path: Path, merge: bool, command: str) -> str:
    """Write the passing rows of a step table (:mod:`.step_bench`: ``shape`` with ``M`` tokens
    and ``B`` experts, ``ms`` per path) to the table at ``path``; the line that says so."""
    from kernel_ratchet.kernels.gemm.compare import versions

    layers = [(r.shape.M, r.shape.B, r.shape.N, r.shape.K, r.ms) for r in rows if r.ok]
    measured = measured_rows(layers)
    total = write_table(path, measured, versions() | {"command": command}, merge)
    return f"dispatch table: {len(measured)} rows measured, {total} in {path}"
