"""``ratchet bench``: run the project's benchmark command and show its output next to the
harness's latest numbers for the same op, each labelled with its source."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from kernel_ratchet.cli.common import ProfileOpt, app, out, profile_at

#: Lines of the benchmark's output shown; the log keeps all of it.
SHOWN_LINES = 40


@app.command()
def bench(
    op: str | None = typer.Option(None, "--op", help="op name (default: every op with one)"),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds before it is stopped"),
    profile: Path | None = ProfileOpt,
):
    """Run ops.<op>.benchmark and show its output beside the harness's numbers for the op.

    Exits 0 when every benchmark exits 0, 1 when one fails or times out."""
    from kernel_ratchet.campaign.bench import bench_ops, latest_harness, run_benchmark

    prof = profile_at(profile)
    failed = 0
    for name in bench_ops(prof, op):
        step = run_benchmark(prof, name, timeout_s=timeout)
        failed += not step.ok
        rc = "timed out" if step.returncode is None else f"exit code {step.returncode}"
        out.print(
            f"[bold]{escape(name)}[/bold]: the project's benchmark: `{escape(step.command)}`",
            markup=True,
        )
        out.print(f"  {rc}, {step.seconds:.1f} s; log {step.log}", soft_wrap=True)
        lines = Path(step.log).read_text(encoding="utf-8", errors="replace").splitlines()[2:]
        for line in lines[-SHOWN_LINES:]:
            out.print(f"  | {escape(line)}", highlight=False, soft_wrap=True)
        _show_harness(latest_harness(prof, name))
    raise typer.Exit(1 if failed else 0)


def _show_harness(h) -> None:
    out.print(f"  {escape(h.source)}", soft_wrap=True)
    if h.table is None:
        return
    s = h.table.schema
    table = Table("label", "Check", s.fwd_metric, s.bwd_metric)
    for r in h.table.rows:
        table.add_row(r.label, r.check, f"{r.fwd:.4g}", f"{r.bwd:.4g}")
    out.print(table)
