"""The frozen CSV schemas and the one reader every part of the system uses.

GEMM-class ops write exactly :data:`GEMM_HEADER` (SPEC section 5, byte for byte).
Memory-bound ops write :data:`MEMORY_HEADER`:

    label,B,M,N,Check,Forward GB/s,Forward GB/s_stddev,Backward GB/s,Backward GB/s_stddev,
    Forward Time (ms),Backward Time (ms),out_snr

``M``/``N`` are the rows/columns of the tensor, ``B`` a batch count, GB/s counts the minimum
bytes read + written (``Adapter.bytes_moved``) over the median time, ``*_stddev`` are absolute
standard deviations in GB/s over the timing samples, ``out_snr`` the SNR in dB of the output
against the reference. Forward-only ops leave the backward cells empty.

A schema is frozen at BASELINE: its header bytes and their sha256 go into the manifest and
every later CSV is checked against them. A drifted, missing or renamed column is a
:class:`SchemaError`, never a silently skipped gate.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel_ratchet.errors import SchemaError

GEMM_COLUMNS: tuple[str, ...] = (
    "label",
    "B",
    "M",
    "N",
    "K",
    "Check",
    "Forward TFLOPS",
    "Forward TFLOPS_stddev",
    "Backward TFLOPS",
    "Backward TFLOPS_stddev",
    "Forward Time (ms)",
    "Backward Time (ms)",
    "out_snr",
    "da_snr",
    "db_snr",
)
MEMORY_COLUMNS: tuple[str, ...] = (
    "label",
    "B",
    "M",
    "N",
    "Check",
    "Forward GB/s",
    "Forward GB/s_stddev",
    "Backward GB/s",
    "Backward GB/s_stddev",
    "Forward Time (ms)",
    "Backward Time (ms)",
    "out_snr",
)

GEMM_HEADER = ",".join(GEMM_COLUMNS)
MEMORY_HEADER = ",".join(MEMORY_COLUMNS)


@dataclass(frozen=True)
class Schema:
    """A named, frozen column list and what its metrics mean."""

    name: str
    columns: tuple[str, ...]
    fwd_metric: str
    bwd_metric: str
    unit: str
    snr_columns: tuple[str, ...]

    @property
    def header(self) -> str:
        return ",".join(self.columns)

    @property
    def header_sha256(self) -> str:
        return hashlib.sha256(self.header.encode()).hexdigest()


SCHEMAS: dict[str, Schema] = {
    "gemm": Schema(
        "gemm",
        GEMM_COLUMNS,
        "Forward TFLOPS",
        "Backward TFLOPS",
        "TFLOPS",
        ("out_snr", "da_snr", "db_snr"),
    ),
    "memory": Schema(
        "memory",
        MEMORY_COLUMNS,
        "Forward GB/s",
        "Backward GB/s",
        "GB/s",
        ("out_snr",),
    ),
}


def get_schema(name: str) -> Schema:
    try:
        return SCHEMAS[name]
    except KeyError:
        raise SchemaError(f"unknown CSV schema {name!r}; known: {sorted(SCHEMAS)}") from None


@dataclass(frozen=True)
class Row:
    """One parsed CSV row. Numbers are floats (NaN where a cell is empty)."""

    label: str
    B: int
    M: int
    N: int
    K: int
    check: str
    fwd: float
    fwd_std: float
    bwd: float
    bwd_std: float
    fwd_ms: float
    bwd_ms: float
    snr: dict[str, float]

    @property
    def passed(self) -> bool:
        return self.check == "PASS"


@dataclass(frozen=True)
class BenchTable:
    """A parsed benchmark CSV: its schema and rows in file order."""

    schema: Schema
    rows: tuple[Row, ...]

    def by_label(self) -> dict[str, Row]:
        return {r.label: r for r in self.rows}

    def restrict(self, labels: Sequence[str]) -> BenchTable:
        """The rows of ``labels`` (in that order; labels without a row are skipped)."""
        by = self.by_label()
        return BenchTable(self.schema, tuple(by[x] for x in labels if x in by))

    def to_records(self) -> list[dict]:
        """The rows as JSON-safe dicts: an empty cell (NaN) is ``None``, an infinite value the
        string ``"inf"`` or ``"-inf"`` (as the CSV writes it), every other number a float."""
        out = []
        for r in self.rows:
            out.append(
                {
                    "label": r.label,
                    "B": r.B,
                    "M": r.M,
                    "N": r.N,
                    "K": r.K,
                    "Check": r.check,
                    "fwd": _json_num(r.fwd),
                    "fwd_std": _json_num(r.fwd_std),
                    "bwd": _json_num(r.bwd),
                    "bwd_std": _json_num(r.bwd_std),
                    "fwd_ms": _json_num(r.fwd_ms),
                    "bwd_ms": _json_num(r.bwd_ms),
                    "snr": {k: _json_num(v) for k, v in r.snr.items()},
                }
            )
        return out

    def to_json(self) -> str:
        """``{"schema": name, "rows": to_records()}`` as strict JSON (no NaN or Infinity)."""
        doc = {"schema": self.schema.name, "rows": self.to_records()}
        return json.dumps(doc, indent=2, allow_nan=False)


def _json_num(x: float) -> float | str | None:
    """A number JSON can carry: None for NaN (an empty cell), "inf"/"-inf" for infinities."""
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _num(cell: str, *, path: str, line: int, column: str) -> float:
    """The cell as a float; NaN for an empty cell or ``-`` (float() itself skips whitespace)."""
    try:
        return float(cell)
    except ValueError:
        cell = cell.strip()
        if cell in ("", "-"):
            return math.nan
        raise SchemaError(
            f"{path}:{line}: column {column!r} holds {cell!r}, which is not a number"
        ) from None


def detect_schema(header: str) -> Schema:
    for schema in SCHEMAS.values():
        if header == schema.header:
            return schema
    raise SchemaError(_header_mismatch(header, None))


def _header_mismatch(header: str, expected: Schema | None) -> str:
    got = header.split(",")
    candidates = [expected] if expected else list(SCHEMAS.values())
    best = min(candidates, key=lambda s: len(set(s.columns) ^ set(got)))
    missing = [c for c in best.columns if c not in got]
    extra = [c for c in got if c not in best.columns]
    msg = f"CSV header does not match the frozen {best.name!r} schema."
    if missing:
        msg += f" Missing column(s): {missing}."
    if extra:
        msg += f" Unexpected column(s): {extra}."
    if not missing and not extra:
        msg += " Same columns in another order."
    msg += f" Expected exactly: {best.header!r}. Fix the harness output, not the schema."
    return msg


def _schema_of(header: str, expected: Schema | None, path: str) -> Schema:
    """The schema of ``header``: ``expected`` when it matches byte for byte, else detected."""
    if expected is not None:
        if header != expected.header:
            raise SchemaError(f"{path}: " + _header_mismatch(header, expected))
        return expected
    try:
        return detect_schema(header)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None


def _row(cells: list[str], schema: Schema, path: str, line: int) -> Row:
    """One data line as a :class:`Row` (SchemaError names the line and what is wrong)."""
    cols = schema.columns
    if len(cells) != len(cols):
        raise SchemaError(f"{path}:{line}: {len(cells)} cells, the schema has {len(cols)}")
    rec = dict(zip(cols, cells, strict=True))
    check = rec["Check"].strip()
    if check not in ("PASS", "FAIL"):
        raise SchemaError(f"{path}:{line}: Check is {check!r}; it must be PASS or FAIL")

    def num(column: str) -> float:
        return _num(rec[column], path=path, line=line, column=column)

    dims = {}
    for d in ("B", "M", "N", "K"):
        v = num(d) if d in rec else 0.0
        if math.isinf(v) or (not math.isnan(v) and v != int(v)):
            raise SchemaError(f"{path}:{line}: dimension {d} is {rec[d]!r}, not an integer")
        dims[d] = 0 if math.isnan(v) else int(v)
    return Row(
        label=rec["label"],
        check=check,
        fwd=num(schema.fwd_metric),
        fwd_std=num(schema.fwd_metric + "_stddev"),
        bwd=num(schema.bwd_metric),
        bwd_std=num(schema.bwd_metric + "_stddev"),
        fwd_ms=num("Forward Time (ms)"),
        bwd_ms=num("Backward Time (ms)"),
        snr={c: num(c) for c in schema.snr_columns},
        **dims,
    )


def _refuse_nul(text: str, path: str) -> None:
    """SchemaError naming the line of the first NUL character: a CSV holding one is not text."""
    at = text.find("\x00")
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        raise SchemaError(
            f"{path}:{line}: holds a NUL byte, so it is not text and not a benchmark CSV. "
            "Fix: point at the CSV the harness wrote (its --summary-csv)"
        )


def _rows(lines: list[str], schema: Schema, path: str) -> list[Row]:
    """The data lines (the header excluded) as rows; each row costs time linear in its size."""
    reader = csv.reader(io.StringIO("\n".join(lines)))
    rows: list[Row] = []
    try:
        for i, cells in enumerate(reader, start=2):
            if cells:
                rows.append(_row(cells, schema, path, i))
    except csv.Error as exc:
        raise SchemaError(
            f"{path}:{reader.line_num + 1}: unreadable as CSV ({exc}), so it is not a "
            "benchmark CSV. Fix: point at the CSV the harness wrote (its --summary-csv)"
        ) from None
    return rows


def parse_csv_text(text: str, *, expected: Schema | None = None, path: str = "<csv>") -> BenchTable:
    """Parse benchmark CSV text. ``expected`` pins the schema (else it is detected).

    Raises SchemaError for a header that is not byte-identical to the schema (a leading
    byte-order mark included), a row with the wrong number of cells, a Check value other than
    PASS/FAIL, a non-numeric cell, a duplicate label, or text that is not CSV (a NUL byte, a
    cell over the csv module's field limit). Time is linear in the size of ``text``.
    """
    if text.startswith("\ufeff"):
        raise SchemaError(
            f"{path}: starts with a UTF-8 byte-order mark, so its header is not the frozen one "
            "byte for byte; write the CSV as plain UTF-8 (no BOM)"
        )
    _refuse_nul(text, path)
    lines = text.splitlines()
    if not lines:
        raise SchemaError(f"{path}: empty CSV (no header); the harness wrote nothing")
    schema = _schema_of(lines[0].rstrip("\r"), expected, path)
    rows = _rows(lines[1:], schema, path)
    dups = sorted(label for label, n in Counter(r.label for r in rows).items() if n > 1)
    if dups:
        raise SchemaError(f"{path}: duplicate shape label(s) {dups}")
    return BenchTable(schema, tuple(rows))


def read_csv(path: str | Path, *, expected: Schema | None = None) -> BenchTable:
    """The one CSV reader of the system (also ``ratchet parse-csv``)."""
    p = Path(path)
    if not p.is_file():
        raise SchemaError(f"{p}: no such benchmark CSV; did the harness run with --summary-csv?")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.start + 1].hex()
        raise SchemaError(
            f"{p}: not UTF-8 text (byte {exc.start} is 0x{bad}), so it is not a benchmark CSV "
            "(binary or another encoding). Fix: point at the CSV the harness wrote (its "
            "--summary-csv), or re-save the file as UTF-8"
        ) from None
    except OSError as exc:
        raise SchemaError(f"{p}: cannot be read ({exc}); check its permissions") from None
    return parse_csv_text(text, expected=expected, path=str(p))


def format_cell(value: float | int | str | None, digits: int = 6) -> str:
    """Text of one cell: integers as is, floats with ``digits`` significant digits, empty for
    None/NaN (so TFLOPS of a CPU rehearsal, ~1e-6, keep their precision)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def csv_text(schema: Schema, rows: Sequence[Sequence[object]]) -> str:
    """The CSV text of rows (cells in schema column order) with the exact frozen header."""
    buf = io.StringIO()
    buf.write(schema.header + "\n")
    w = csv.writer(buf, lineterminator="\n")
    for row in rows:
        if len(row) != len(schema.columns):
            raise SchemaError(
                f"row has {len(row)} cells, the {schema.name} schema has {len(schema.columns)}"
            )
        w.writerow([format_cell(c) for c in row])
    return buf.getvalue()


def write_csv(path: str | Path, schema: Schema, rows: Sequence[Sequence[object]]) -> None:
    """Write rows (cells in schema column order) with the exact frozen header."""
    text = csv_text(schema, rows)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
