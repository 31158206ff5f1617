"""Setting a campaign up: ``ratchet check`` (the DEFINE_TARGET checklist) and ``ratchet
init`` (DEFINE_TARGET, PREPARE_ENVIRONMENT, READ_HISTORICAL_TIPS)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kernel_ratchet.cli.common import (
    ProfileOpt,
    app,
    err,
    out,
    profile_at,
)


@app.command()
def check(
    op: str | None = typer.Option(None, "--op"),
    patch: Path | None = typer.Option(
        None, "--patch", help="with --op: whether this diff fits one round (kernel files only)"
    ),
    profile: Path | None = ProfileOpt,
):
    """Validate ratchet.yaml and run the DEFINE_TARGET checklist and the environment check."""
    from kernel_ratchet.profile.checklist import all_checks

    prof = profile_at(profile)
    if patch is not None and op is None:
        raise typer.BadParameter("--patch needs --op: a round's scope is its op's kernel_source")
    items = all_checks(prof, op)
    if patch is not None:
        from kernel_ratchet.campaign.patch_scope import patch_scope

        items.append(patch_scope(prof, op, patch))
    table = Table()
    for header in ("check", "ok", "detail / fix"):  # folded, never cut: paths stay whole
        table.add_column(header, overflow="fold")
    for i in items:  # escaped: a command such as pip install '.[dev]' is not markup
        fix = f"\n[yellow]fix:[/yellow] {escape(i.fix)}" if not i.ok and i.fix else ""
        mark = "[yellow]note[/yellow]" if i.warning else "[green]yes[/green]"
        ok = Text.from_markup(mark if i.ok else "[red]NO[/red]")
        table.add_row(i.name, ok, Text.from_markup(escape(i.detail) + fix))
    out.print(table)
    bad = [i for i in items if not i.ok]
    out.print(f"{len(items) - len(bad)}/{len(items)} checks pass ({prof.path})")
    raise typer.Exit(1 if bad else 0)


def _known_engine(name: str | None) -> str | None:
    """``--timing-engine`` must name a registered engine: a campaign created with an unknown
    one could never measure (a usage error, exit 2, listing the engines)."""
    from kernel_ratchet.harness.timing.registry import ENGINES

    if name is not None and name not in ENGINES:
        raise typer.BadParameter(f"unknown timing engine {name!r}; known: {', '.join(ENGINES)}")
    return name


def _rehearsal_or(prof, op: str, rehearse: bool):
    """The profile, or with ``rehearse`` its CPU rehearsal (Triton interpreter, tiny shapes)."""
    if not rehearse:
        return prof
    import os

    from kernel_ratchet.profile.rehearsal import rehearsal_profile

    os.environ["TRITON_INTERPRET"] = "1"
    return rehearsal_profile(prof, op)


@app.command()
def init(
    op: str = typer.Option(..., "--op", help="op name from ratchet.yaml"),
    performance_target: float | None = typer.Option(None, help="T1: aggregate to reach"),
    max_iterations: int = typer.Option(20, help="T3: rounds after the baseline (< 120)"),
    git_branch: str = typer.Option("auto", help="auto: branch optimize/<campaign>; none"),
    commit: bool = typer.Option(True, "--commit/--no-commit", help="commit accepted rounds"),
    timing_engine: str | None = typer.Option(
        None, help="perf_counter | cuda_events", callback=_known_engine
    ),
    regression_threshold: float = typer.Option(0.05, help="per-shape regression gate"),
    efficiency_target: float | None = typer.Option(None, help="T2: fraction of the peak"),
    hardware_peak: float | None = typer.Option(None, help="T2: peak in the primary unit"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    mode: str | None = typer.Option(None, "--mode", help="repo | workspace (default: profile)"),
    another: bool = typer.Option(
        False, "--another", help="start it although a campaign on this op is still open"
    ),
    rehearse: bool = typer.Option(
        False, help="a CPU rehearsal: Triton interpreter, tiny shapes, nothing committed"
    ),
    shapes: str | None = typer.Option(
        None,
        "--shapes",
        help="this campaign's shape set, 'module:function' or 'inline:[...]' "
        "(default: the op's shapes in ratchet.yaml)",
    ),
    profile: Path | None = ProfileOpt,
):
    """DEFINE_TARGET + PREPARE_ENVIRONMENT + READ_HISTORICAL_TIPS: create a campaign."""
    from kernel_ratchet.campaign.create import create_campaign, define_target, preflight
    from kernel_ratchet.campaign.locate import refuse_parallel

    prof = _rehearsal_or(profile_at(profile), op, rehearse)
    if not another:
        refuse_parallel(prof, op)
    params = define_target(
        prof,
        op,
        performance_target=performance_target,
        max_iterations=max_iterations,
        git_branch=git_branch,
        git_commit=commit,
        timing_engine=timing_engine,
        regression_threshold=regression_threshold,
        efficiency_target=efficiency_target,
        hardware_peak=hardware_peak,
        execution_mode=mode,
        rehearsal=rehearse,
        shapes=shapes,
    )
    preflight(prof, op, shapes)  # a refused init prints the refusal alone
    table = Table("parameter", "value", title="DEFINE_TARGET")
    for k, v in params.describe():
        table.add_row(k, v)
    out.print(table)
    if not yes and not typer.confirm("Create this campaign?", default=True):
        raise typer.Exit(1)
    _created(prof, op, create_campaign(prof, params))


def _created(prof, op: str, cdir: Path) -> None:
    """Say where the campaign is, which of the op's setup files its start lacks, what is next."""
    from kernel_ratchet.campaign.setup_files import setup_note

    made = f"campaign [bold]{escape(cdir.name)}[/bold] created in {escape(str(cdir))}"
    out.print(made, markup=True)
    if note := setup_note(prof, op):
        err.print(f"[yellow]{escape(note)}[/yellow]", highlight=False, soft_wrap=True, markup=True)
    out.print("next: `ratchet baseline`")
