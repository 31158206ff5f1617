"""``ratchet fleet``: the campaigns of several ops at once, one per GPU or CPU worker
(:mod:`kernel_ratchet.fleet.campaigns`)."""

from __future__ import annotations

from pathlib import Path

import typer

from kernel_ratchet.cli.common import ProfileOpt, app, err, out, profile_at
from kernel_ratchet.cli.parallel import GpusOpt, Parallel, SchedulerOpt, WorkersOpt
from kernel_ratchet.errors import RatchetError


@app.command()
def fleet(
    ops: str = typer.Option(..., "--ops", help="comma-separated ops of ratchet.yaml"),
    max_iterations: int = typer.Option(20, help="rounds per campaign (T3)"),
    max_duration: str | None = typer.Option(None, help="time budget per campaign, e.g. 2h"),
    gpus: str | None = GpusOpt,
    workers: int = WorkersOpt,
    scheduler: str | None = SchedulerOpt,
    profile: Path | None = ProfileOpt,
):
    """Run one search campaign per op at once, each on its own GPU (or CPU worker), with one
    status view; run it again to resume every campaign that has not ended."""
    parallel = Parallel(gpus, workers, scheduler)
    if not parallel.wanted:
        raise RatchetError("give --gpus 0,1,..., --workers N or --scheduler ADDRESS")
    names = [o.strip() for o in ops.split(",") if o.strip()]
    prof = profile_at(profile)
    for op in names:
        prof.op(op)  # an unknown op is a ratchet.yaml error before anything starts
    parallel.check()  # then the options, and Dask where they need it
    from kernel_ratchet.fleet.campaigns import fleet_campaigns, init_campaign, run_fleet, tasks
    from kernel_ratchet.fleet.pool import open_cluster, parse_gpus

    campaigns = fleet_campaigns(prof, names, lambda op: init_campaign(prof, op, max_iterations))
    args = ["--max-iterations", str(max_iterations)]
    if max_duration:
        args += ["--max-duration", max_duration]
    todo = tasks(prof, campaigns, args)
    codes: dict[str, int] = {}
    if todo:
        gpu_list = parse_gpus(gpus) if gpus else []
        with open_cluster(gpu_list, workers, scheduler) as client:
            say = lambda m: err.print(m, highlight=False, soft_wrap=True)
            codes = run_fleet(client, prof, todo, say)
    for op, name in campaigns.items():
        code = codes.get(op, "it had ended before")
        report = prof.campaign_root_path / name / "report.md"
        out.print(f"{op}: campaign {name}: exit {code}; {report}")
