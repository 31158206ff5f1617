"""The kernel pack's benchmark tables: results JSON files from the bench CSVs, and the markdown
page rendered from them (``docs/benchmarks.md``).

A *results file* holds one op's benchmark: the op, the exact command that produced the CSV, the
environment it ran in (GPU, driver, torch, triton, Python) and the CSV's rows as written by the
op family's ``bench`` module (frozen columns plus vendor columns). ``record`` makes one on the
machine that ran the benchmark; ``render`` turns any number of them into the page, one table
per op, each with its command and environment and a geometric-mean line over the PASS rows::

    python -m kernel_ratchet.kernels.gemm.bench --dtype bf16 --shapes model -o bench_bf16.csv
    python -m kernel_ratchet.kernels.bench_table record --op gemm_bf16 --csv bench_bf16.csv \\
        --command "python -m kernel_ratchet.kernels.gemm.bench --dtype bf16 --shapes model \\
        -o bench_bf16.csv" -o docs/benchmarks/gemm_bf16.json
    python -m kernel_ratchet.kernels.bench_table render docs/benchmarks/*.json \\
        -o docs/benchmarks.md

Which columns a table shows depends on the op family (:data:`LAYOUTS`, chosen by the op name's
prefix): the dense GEMMs show ours against the vendor library per phase, the grouped GEMMs
their PyTorch baselines, the quantization kernels their bandwidth against eager PyTorch and a
device copy.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Row = Mapping[str, str]


@dataclass(frozen=True)
class Results:
    """One op's benchmark: ``rows`` are the bench CSV's rows (column name -> cell text)."""

    op: str
    title: str
    command: str
    environment: Mapping[str, str]
    rows: Sequence[Row]
    notes: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError(f"{self.op}: a results file needs at least one row")
        layout_for(self.op)  # raises for an op no layout covers

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "title": self.title,
            "command": self.command,
            "environment": dict(self.environment),
            "notes": list(self.notes),
            "rows": [dict(r) for r in self.rows],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Results:
        return cls(
            op=d["op"],
            title=d["title"],
            command=d["command"],
            environment=dict(d["environment"]),
            rows=[{k: str(v) for k, v in r.items()} for r in d["rows"]],
            notes=tuple(d.get("notes") or ()),
        )


def num(cell: str | None) -> float:
    """A CSV cell as a float (NaN for empty or non-numeric cells)."""
    try:
        return float(cell) if cell not in (None, "") else math.nan
    except ValueError:
        return math.nan


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean of the positive finite values (NaN when there are none)."""
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


@dataclass(frozen=True)
class Column:
    """One table column: its header, how a row gives its value, its decimals, and whether the
    geometric-mean line has a cell for it."""

    header: str
    value: Callable[[Row, Sequence[Row]], Any]
    digits: int | None = 0  # None: text, shown as is
    geo: bool = False


def _cell(name: str) -> Callable[[Row, Sequence[Row]], Any]:
    return lambda r, _rows: r.get(name, "")


def _num(name: str) -> Callable[[Row, Sequence[Row]], float]:
    return lambda r, _rows: num(r.get(name))


def _snr(*names: str) -> Column:
    return Column(
        "/".join(n.split("_")[0] for n in names) + " SNR dB",
        lambda r, _rows: "/".join(f"{num(r.get(n)):.1f}" for n in names),
        None,
    )


def _step(r: Row, _rows: Sequence[Row]) -> float:
    """Combined step TFLOPS from forward and backward TFLOPS: 6 / (2 / fwd + 4 / bwd)."""
    fwd, bwd = num(r.get("Forward TFLOPS")), num(r.get("Backward TFLOPS"))
    return 6.0 / (2.0 / fwd + 4.0 / bwd) if fwd > 0 and bwd > 0 else math.nan


def _vs_uniform(r: Row, rows: Sequence[Row]) -> float:
    """Forward TFLOPS over that of the same model and projection on the uniform distribution
    (labels ``<model>_<projection>_<distribution>``)."""
    prefix = r["label"].rsplit("_", 1)[0] if r["label"].count("_") >= 2 else None
    uniform = next((u for u in rows if u["label"] == f"{prefix}_uniform"), None)
    if prefix is None or uniform is None:
        return math.nan
    return num(r.get("Forward TFLOPS")) / num(uniform.get("Forward TFLOPS"))


_SHAPE = [Column("shape", _cell("label"), None)]
LAYOUTS: dict[str, list[Column]] = {
    "grouped_gemm_": [
        *_SHAPE,
        Column("B", _cell("B"), None),
        Column("M", _cell("M"), None),
        Column("N", _cell("N"), None),
        Column("K", _cell("K"), None),
        Column("check", _cell("Check"), None),
        Column("fwd", _num("Forward TFLOPS"), 0, True),
        Column("bwd", _num("Backward TFLOPS"), 0, True),
        Column("step", _step, 0, True),
        Column("loop of torch.mm", _num("loop TFLOPS"), 0, True),
        Column("torch._grouped_mm", _num("torch._grouped_mm TFLOPS"), 0, True),
        Column("dense cuBLAS", _num("dense TFLOPS"), 0, True),
        Column("fwd / dense", _num("fwd / dense"), 3, True),
        Column("fwd / uniform", _vs_uniform, 3),
        _snr("out_snr", "da_snr", "db_snr"),
    ],
    "gemm_": [
        *_SHAPE,
        Column("M", _cell("M"), None),
        Column("N", _cell("N"), None),
        Column("K", _cell("K"), None),
        Column("check", _cell("Check"), None),
        Column("fwd", _num("Forward TFLOPS"), 0, True),
        Column("vendor fwd", _num("Vendor Forward TFLOPS"), 0, True),
        Column("fwd ratio", _num("fwd_ratio"), 3, True),
        Column("bwd", _num("Backward TFLOPS"), 0, True),
        Column("vendor bwd", _num("Vendor Backward TFLOPS"), 0, True),
        Column("bwd ratio", _num("bwd_ratio"), 3, True),
        Column("step", _num("Step TFLOPS"), 0, True),
        Column("vendor step", _num("Vendor Step TFLOPS"), 0, True),
        Column("step ratio", _num("step_ratio"), 3, True),
        _snr("out_snr", "da_snr", "db_snr"),
    ],
    "quant_": [
        *_SHAPE,
        Column("M", _cell("M"), None),
        Column("N", _cell("N"), None),
        Column("check", _cell("Check"), None),
        Column("GB/s", _num("Forward GB/s"), 0, True),
        Column("eager PyTorch GB/s", _num("torch eager GB/s"), 0, True),
        Column("copy GB/s", _num("copy GB/s"), 0, True),
        Column("fraction of copy", _num("fraction of copy"), 2, True),
        Column("out SNR dB", _num("out_snr"), 1),
    ],
}


def layout_for(op: str) -> list[Column]:
    """The columns of ``op``'s table (the layout of the longest matching name prefix). Raises
    ValueError for an op no layout covers."""
    matches = [p for p in LAYOUTS if op.startswith(p)]
    if not matches:
        raise ValueError(f"no table layout for op {op!r}; known prefixes: {sorted(LAYOUTS)}")
    return LAYOUTS[max(matches, key=len)]


def _fmt(value: Any, digits: int | None) -> str:
    if digits is None:
        return str(value)
    return "nan" if not math.isfinite(value) else f"{value:.{digits}f}"


def table(results: Results) -> str:
    """The op's markdown table with a geometric-mean line over its PASS rows."""
    cols = layout_for(results.op)
    rows = results.rows
    lines = [
        "| " + " | ".join(c.header for c in cols) + " |",
        "|" + "|".join("---" if c.digits is None else "---:" for c in cols) + "|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(c.value(r, rows), c.digits) for c in cols) + " |")
    ok = [r for r in rows if r.get("Check") == "PASS"]
    cells = [f"**geomean** ({len(ok)}/{len(rows)} PASS)"]
    for c in cols[1:]:
        g = geomean([c.value(r, rows) for r in ok]) if c.geo else None
        cells.append("" if g is None else f"**{_fmt(g, c.digits)}**")
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(results: Results) -> str:
    """One op's section: title, environment, command, notes, table."""
    env = ", ".join(f"{k} {v}" for k, v in results.environment.items())
    parts = [
        f"### {results.title} (`{results.op}`)",
        "",
        f"Environment: {env}.",
        "",
        "```",
        results.command,
        "```",
        "",
    ]
    parts += [*(f"- {n}" for n in results.notes), ""] if results.notes else []
    return "\n".join([*parts, table(results), ""])


def render(results: Sequence[Results], preamble: str = "") -> str:
    """The whole page: ``preamble``, then one section per results file in the given order."""
    body = "\n".join(section(r) for r in results)
    return (preamble.rstrip() + "\n\n" if preamble else "") + body


#: What a results file says about the machine of its measurements.
ENV_KEYS = ("GPU", "driver", "torch", "triton", "Python")


def environment() -> dict[str, str]:
    """The GPU, driver, torch, triton and Python versions of this machine."""
    import torch
    import triton

    env = {"GPU": torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)"}
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        out = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout
        env["driver"] = out.strip().splitlines()[0] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        env["driver"] = "?"
    env.update(torch=torch.__version__, triton=triton.__version__)
    env["Python"] = platform.python_version()
    return env


def record(
    op: str,
    csv_path: Path,
    command: str,
    title: str,
    notes: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Results:
    """A results file's content from a bench CSV, with the environment the CSV was measured in:
    ``env`` where given (the CSV came from another machine), else this machine's."""
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return Results(op, title, command, dict(env) if env else environment(), rows, tuple(notes))


def _env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``["GPU=NVIDIA H200", ...]`` -> a dict naming every key of :func:`environment`."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise SystemExit(f"error: --env takes KEY=VALUE, got {pair!r}")
        out[key] = value
    missing = [k for k in ENV_KEYS if k not in out]
    if out and missing:
        raise SystemExit(
            f"error: --env must name the whole environment the CSV was measured in; "
            f"missing {', '.join(missing)} (keys: {', '.join(ENV_KEYS)})"
        )
    return out


def _kept_text(
    output: Path, op: str, title: str | None, notes: Sequence[str]
) -> tuple[str, Sequence[str]]:
    """The section's title and notes: as given, else those of the op's results file being
    measured again (a new table keeps the text that explains it), else the op's name."""
    old = Results.from_dict(json.loads(output.read_text())) if output.exists() else None
    if old is None or old.op != op:
        return title or op, notes
    return title or old.title, notes or old.notes


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m kernel_ratchet.kernels.bench_table", description=__doc__.splitlines()[0]
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="a results JSON from a bench CSV (on the GPU machine)")
    rec.add_argument("--op", required=True)
    rec.add_argument("--csv", required=True, type=Path)
    rec.add_argument("--command", required=True, help="the command that wrote the CSV")
    rec.add_argument("--title", help="section title (default: the op)")
    rec.add_argument(
        "--note",
        action="append",
        default=[],
        help="a line under the command (default: the lines the output file already holds)",
    )
    rec.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the environment of the machine that wrote the CSV, when recording elsewhere "
        f"(every key: {', '.join(ENV_KEYS)}); default: this machine's",
    )
    rec.add_argument("-o", "--output", required=True, type=Path)
    ren = sub.add_parser("render", help="the markdown page from results JSON files")
    ren.add_argument("results", nargs="+", type=Path)
    ren.add_argument("--preamble", type=Path, help="markdown put before the sections")
    ren.add_argument("-o", "--output", type=Path, help="default: print")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.cmd == "record":
        env = _env_pairs(args.env)
        title, notes = _kept_text(args.output, args.op, args.title, args.note)
        res = record(args.op, args.csv, args.command, title, notes, env)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(res.to_dict(), indent=1) + "\n")
        return 0
    results = [Results.from_dict(json.loads(p.read_text())) for p in args.results]
    page = render(results, args.preamble.read_text() if args.preamble else "")
    if args.output:
        args.output.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
