"""``ratchet sweep`` (the exhaustive sweep of a tunables file's knobs) and ``ratchet
sweep-compare`` (a campaign's result against the sweep's best, by the paired A/B)."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from kernel_ratchet.cli.common import ProfileOpt, app


@app.command("sweep")
def sweep(
    op: str = typer.Option(..., "--op"),
    entry: list[str] = typer.Option(
        ..., "--entry", help="ENTRY[=fwd|bwd|both], repeatable, e.g. CONFIGS/bf16/large=fwd"
    ),
    knobs: str = typer.Option(..., "--knobs", help="comma-separated knobs swept jointly"),
    campaign: Path | None = typer.Option(
        None, "--campaign", help="campaign directory: sweep its representative shapes"
    ),
    shapes: int = typer.Option(5, "--shapes", help="without --campaign: N shapes of the set"),
    profile: Path | None = ProfileOpt,
    max_configs: int = typer.Option(200, "--max-configs", help="per entry"),
    budget_s: float = typer.Option(
        math.inf,
        "--budget-s",
        help="start no configuration past this many seconds, then score what was measured",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="keep the configurations an existing --output of the same sweep measured",
    ),
    output: Path = typer.Option(Path("sweep.json"), "-o", "--output"),
):
    """Measure every combination of KNOBS in the tunables entries (the search's space, swept
    exhaustively) on the op's shapes; write the configurations, their scores and the best."""
    from kernel_ratchet.optimizers.sweep import SweepRequest, run_sweep

    request = SweepRequest(
        op=op,
        entries=tuple(entry),
        knobs=tuple(knobs.split(",")),
        output=output,
        campaign=campaign,
        n_shapes=shapes,
        profile=profile,
        max_configs=max_configs,
        budget_s=budget_s,
        resume=resume,
    )
    raise typer.Exit(run_sweep(request))


@app.command("sweep-compare")
def sweep_compare(
    sweep: Path = typer.Option(..., "--sweep", help="the JSON `ratchet sweep` wrote"),
    root: Path = typer.Option(Path("."), "--root", help="the campaign's project checkout"),
    campaign: Path | None = typer.Option(
        None, "--campaign", help="campaign directory: add its representative shapes"
    ),
    target: float = typer.Option(0.97, "--target", help="the ratio the campaign must reach"),
    k_max: int | None = typer.Option(
        None, "--k-max", help="round budget of the A/B (default: the campaigns')"
    ),
    output: Path = typer.Option(Path("compare.json"), "-o", "--output"),
    logs: Path | None = typer.Option(None, "--logs", help="keep the worker logs here"),
):
    """Measure the campaign's checkout against the sweep's best configuration (paired A/B) and
    say whether it reached TARGET of it."""
    from kernel_ratchet.optimizers.sweep_compare import CompareRequest, compare

    request = CompareRequest(
        root=root.resolve(),
        sweep=sweep,
        output=output,
        campaign=campaign.resolve() if campaign else None,
        target=target,
        k_max=k_max,
        logs=logs,
    )
    raise typer.Exit(compare(request))
