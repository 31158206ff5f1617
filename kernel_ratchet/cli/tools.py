"""Commands beside the rounds: ``parse-csv`` (the one CSV reader), ``tips show|add``,
``sync-back`` (workspace-mode), ``export`` (a campaign's records, to commit) and ``mcp`` (the
MCP server)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from kernel_ratchet.cli.common import (
    CampaignOpt,
    ProfileOpt,
    app,
    open_campaign,
    out,
    profile_at,
    tips_app,
)
from kernel_ratchet.errors import RatchetError


@app.command("parse-csv")
def parse_csv(
    path: Path,
    as_json: bool = typer.Option(
        False,
        "--json",
        help='print strict JSON: an empty cell is null, an infinity the string "inf"/"-inf"',
    ),
):
    """Parse a benchmark CSV with the one reader (schema detected and checked)."""
    from kernel_ratchet.harness.csv_schema import read_csv

    t = read_csv(path)
    if as_json:
        print(t.to_json())
        return
    table = Table(
        "label",
        "Check",
        t.schema.fwd_metric,
        t.schema.bwd_metric,
        title=f"{path} ({t.schema.name} schema)",
    )
    for r in t.rows:
        table.add_row(r.label, r.check, f"{r.fwd:.4g}", f"{r.bwd:.4g}")
    out.print(table)


def _tips_file(prof, op: str, gpu: str | None):
    from kernel_ratchet.campaign.create import detect_gpu
    from kernel_ratchet.campaign.tips import tips_path

    o = prof.op(op)
    return tips_path(prof.tips_root_path, gpu or detect_gpu(), op, o.backend)


@tips_app.command("show")
def tips_show(
    op: str = typer.Option(..., "--op"), gpu: str | None = None, profile: Path | None = ProfileOpt
):
    """Print the tips recorded for this op, backend and GPU."""
    path = _tips_file(profile_at(profile), op, gpu)
    out.print(path.read_text() if path.exists() else f"no tips yet ({path})")


@tips_app.command("add")
def tips_add(
    op: str = typer.Option(..., "--op"),
    round_no: int = typer.Option(..., "--round"),
    status_: str = typer.Option(..., "--status", help="ACCEPTED or 'ROLLED BACK'"),
    context: str = typer.Option(...),
    signal: str = typer.Option(...),
    takeaway: str = typer.Option(...),
    applicability: str = typer.Option(...),
    gpu: str | None = None,
    profile: Path | None = ProfileOpt,
):
    """Append one tip (SPEC section 7 format)."""
    from kernel_ratchet.campaign.tips import add_tip

    if status_ not in ("ACCEPTED", "ROLLED BACK"):
        raise RatchetError("--status must be ACCEPTED or 'ROLLED BACK'")
    path = _tips_file(profile_at(profile), op, gpu)
    out.print(add_tip(path, round_no, status_, context, signal, takeaway, applicability))


@app.command("sync-back")
def sync_back(
    commit: bool = typer.Option(True, "--commit/--no-commit", help="commit the kernel files"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Workspace-mode: apply the accepted kernel change to the project and re-validate it there."""
    from kernel_ratchet.campaign.sync_back import sync_back as do_sync
    from kernel_ratchet.cli.dashboard import after_round

    with open_campaign(profile, campaign) as c:
        res = do_sync(c, commit=commit)
        after_round(c)
    for line in res.details:
        out.print(line)
    out.print("[green]SYNCED[/green]" if res.ok else "[red]SYNC-BACK FAILED[/red]", markup=True)
    raise typer.Exit(0 if res.ok else 1)


@app.command("export")
def export(
    dest: Path = typer.Argument(
        ..., help="a new or empty folder, e.g. campaigns/<op>/<name>; or a new <name>.tar.gz"
    ),
    traces: bool = typer.Option(False, help="also each round's timing trace (timings.jsonl)"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Copy the campaign's records (manifest, state, logs, REPORT, each round's summary,
    record, candidate diff and paired A/B) into DEST, to commit them as the evidence of its
    numbers; no worktree, snapshot or profile. A DEST ending in .tar.gz or .tgz gets them as
    one archive."""
    with open_campaign(profile, campaign) as c:  # no round in flight while it copies
        written = c.export(dest, traces=traces)
    out.print(f"{len(written)} files of {c.dir.name} written to {dest}")


@app.command("mcp")
def mcp_server(profile: Path | None = ProfileOpt):
    """Serve the campaign tools over MCP (stdio) for an editor agent (needs the mcp extra)."""
    from kernel_ratchet.mcp.server import serve

    serve(profile)
