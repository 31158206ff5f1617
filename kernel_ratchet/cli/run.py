"""The unattended commands: ``ratchet run`` (a whole campaign, driven by an optimizer) and
``ratchet resume``."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kernel_ratchet.cli.common import (
    CampaignOpt,
    KnobsOpt,
    PauseOpt,
    ProfileOpt,
    QueueOpt,
    app,
    err,
    out,
    profile_at,
)
from kernel_ratchet.cli.optimizer_choice import choose_optimizer
from kernel_ratchet.cli.parallel import (
    CandidateTimeoutOpt,
    GpusOpt,
    Parallel,
    SchedulerOpt,
    WorkersOpt,
    round_runner,
)
from kernel_ratchet.errors import RatchetError


@contextmanager
def _live_view(title: str) -> Iterator:
    """A live table of the rounds of ``ratchet run`` (stderr), shown from the run's first
    message on (a run refused before it starts prints no empty table); yields (say,
    on_round)."""
    from rich.live import Live

    rows: list = []
    state: dict = {"msg": "starting", "live": None}

    def render() -> Table:
        t = Table(
            "round",
            "status",
            "category",
            "vs incumbent",
            "change",
            title=f"{title} — {state['msg']}",
            title_justify="left",
        )
        for r in rows[-20:]:
            color = "green" if r.accepted else "red"
            t.add_row(
                str(r.round),
                Text(r.label, style=color),
                r.category.value,
                "-" if r.gain is None or math.isnan(r.gain) else f"{r.gain * 100:+.2f}%",
                r.summary or r.hypothesis,
            )
        return t

    def live() -> Live:
        if state["live"] is None:
            state["live"] = Live(render(), console=err, refresh_per_second=4)
            state["live"].start()
        return state["live"]

    def say(msg: str) -> None:
        state["msg"] = msg
        stamp = time.strftime("%H:%M:%S")  # local time, as every record's timestamps
        live().console.print(Text(f"{stamp} {msg}", style="dim"), highlight=False)
        live().update(render())

    def on_round(rec) -> None:
        rows.append(rec)
        live().update(render())

    try:
        yield say, on_round
    finally:
        if state["live"] is not None:
            state["live"].stop()
            if not err.is_terminal:  # Live ends its last table without a newline off a terminal
                err.line()  # so an error's message, printed next, starts on a line of its own


def _pause_note(op: str | None, n: int) -> None:
    """What --pause does on a campaign that this run creates (``op``; None: nothing to say),
    said before it starts."""
    if op is None:
        return
    err.print(
        f"note: --max-iterations {n} is also this new campaign's T3: it ends (REPORT) after "
        f"{n} rounds, and --pause pauses only at --max-duration. For {n} rounds of a longer "
        f"campaign: `ratchet init --op {op} --max-iterations M`, then `ratchet resume "
        f"--max-iterations {n} --pause`.",
        highlight=False,
        soft_wrap=True,
    )


def _drive(
    prof,
    op: str | None,
    campaign: str | None,
    optimizer,
    *,
    max_iterations: int,
    max_duration: str | None,
    efficiency_target: float | None,
    init: dict,
    pause: bool = False,
    parallel: Parallel | None = None,
    known_failure: str | None = None,
) -> None:
    import threading

    from kernel_ratchet.optimizers.budget import graceful_interrupt, parse_duration
    from kernel_ratchet.optimizers.loop import run_campaign

    stop = threading.Event()
    title = f"ratchet run ({optimizer.name})"
    with (
        round_runner(parallel or Parallel()) as runner,
        _live_view(title) as (say, on_round),
        graceful_interrupt(stop, say),
    ):
        res = run_campaign(
            prof,
            op,
            optimizer,
            campaign=campaign,
            max_iterations=max_iterations,
            max_duration_s=parse_duration(max_duration),
            efficiency_target=efficiency_target,
            say=say,
            stop_flag=stop,
            on_round=on_round,
            init=init,
            pause_at_budget=pause,
            runner=runner,
            known_failure=known_failure,
        )
    if getattr(optimizer, "instructions", ""):
        out.print(optimizer.instructions)
    code, why = res.stop or ("-", "-")
    acc = sum(1 for r in res.rounds if r.accepted)
    from kernel_ratchet.campaign.record import WOULD_ACCEPT

    would = sum(1 for r in res.rounds if r.label == WOULD_ACCEPT)
    rehearsed = f" (REHEARSAL: {would} would accept, none committed)" if would else ""
    out.print(
        f"campaign [bold]{escape(res.campaign_dir.name)}[/bold]: "
        + escape(f"{len(res.rounds)} rounds this run, {acc} accepted{rehearsed}; ")
        + escape(f"stopped: {code} — {why}"),
        markup=True,
    )
    if res.report is not None:
        out.print(f"report: {res.campaign_dir / 'report.md'} ({_after_report(res.report)})")
        if res.report.branch:
            out.print(escape(res.report.branch), highlight=False, soft_wrap=True)


def _after_report(done) -> str:
    """What follows a written report: acceptance, or nothing where no round was accepted."""
    none = "no round was accepted: the incumbent is the starting commit, nothing to accept"
    return "next: `ratchet accept`" if done.accepted else none


def _rehearsal(rehearse: bool) -> None:
    """Without a GPU only a rehearsal runs: the Triton interpreter on the CPU, said so."""
    import os

    import torch

    if not torch.cuda.is_available() and not rehearse:
        raise RatchetError(
            "no CUDA GPU on this machine: add --rehearse to rehearse the "
            "campaign in the Triton interpreter on tiny shapes (CPU timings "
            "are meaningless for tuning)"
        )
    if rehearse:
        os.environ["TRITON_INTERPRET"] = "1"
        err.print(
            "[yellow]rehearsal: Triton interpreter on the CPU, tiny shapes; "
            "the timings are meaningless for tuning[/yellow]",
            markup=True,
        )


def _scaffold(example: str, dest: Path | None, rehearse: bool) -> tuple[Path, str]:
    """Scaffold ``--example`` (put on this process's PYTHONPATH); returns (root, op)."""
    import os

    from kernel_ratchet.campaign.example import scaffold

    root, op = scaffold(
        example, dest or Path.cwd() / f"ratchet-example-{example}", rehearse=rehearse
    )
    paths = [str(root), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    out.print(
        f"scaffolded [bold]{escape(str(root))}[/bold] "
        + escape(f"(op {op}); later commands there need `export PYTHONPATH={root}` or ")
        + escape(f"`pip install -e {root}`"),
        markup=True,
    )
    return root, op


def _check_start(prof, op: str | None, campaign: str | None, another: bool, opt) -> str | None:
    """The campaign to continue (``campaign``; with neither an op nor a campaign named, the
    project's most recent one while it is open: ``ratchet init`` then ``ratchet run``).
    Refuses, before asking anything, a run with neither and no open campaign, a second open
    campaign on the op (unless ``--another``) and an op the optimizer cannot drive (a search
    with nothing to move)."""
    if not op and not campaign:
        from kernel_ratchet.campaign.locate import list_campaigns
        from kernel_ratchet.campaign.state import Phase, State

        latest = (list_campaigns(prof) or [None])[-1]
        if latest is not None and State.load(latest).phase in (
            Phase.INITIALIZED,
            Phase.OPTIMIZING,
        ):
            err.print(f"continuing campaign {latest.name} (the most recent; --op OP starts one)")
            return latest.name
        raise RatchetError(
            "give --op OP for a new campaign (or --campaign NAME / `ratchet "
            "resume` to continue one)"
            + (f"; the most recent campaign, {latest.name}, has ended" if latest else "")
        )
    if op and not campaign:
        if not another:
            from kernel_ratchet.campaign.locate import refuse_parallel

            refuse_parallel(prof, op)
        opt.check_ready(prof.root, prof.op(op))
    return campaign


@app.command()
def run(
    op: str | None = typer.Option(None, "--op", help="op name from ratchet.yaml (new campaign)"),
    optimizer: str = typer.Option("search", help="search | agent | manual | queue"),
    max_iterations: int = typer.Option(20, help="rounds after the baseline (T3, < 120)"),
    max_duration: str | None = typer.Option(None, help="time budget, e.g. 2h, 90m"),
    agent_cmd: str | None = typer.Option(None, help="agent command template ({prompt_file})"),
    agent_timeout: float = typer.Option(1800.0, help="seconds per agent call"),
    example: str | None = typer.Option(None, help="scaffold a kernel-pack op (or 'tiny')"),
    dest: Path | None = typer.Option(None, help="where --example scaffolds its project"),
    rehearse: bool = typer.Option(False, help="CPU: Triton interpreter, tiny shapes"),
    efficiency_target: float | None = typer.Option(None, help="T2: fraction of the roofline"),
    knobs: str | None = KnobsOpt,
    queue: str | None = QueueOpt,
    pause: bool = PauseOpt,
    gpus: str | None = GpusOpt,
    workers: int = WorkersOpt,
    scheduler: str | None = SchedulerOpt,
    candidate_timeout: float = CandidateTimeoutOpt,
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    another: bool = typer.Option(False, "--another", help="start one while one on the op is open"),
    known_failure: str | None = typer.Option(None, help="as `baseline --known-failure`"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Run a whole campaign unattended: init, BASELINE, rounds proposed by the optimizer, REPORT.
    First Ctrl+C: finish the current round and write the report; second: stop at once
    (`ratchet resume` continues). `--pause`: a spent budget of this run pauses the campaign
    instead (over sessions); a campaign this run creates ends at --max-iterations, its T3."""
    parallel = Parallel(gpus, workers, scheduler, candidate_timeout)
    parallel.check()
    if example or rehearse:
        _rehearsal(rehearse)
    if example:
        root, op = _scaffold(example, dest, rehearse)
        profile = root / "ratchet.yaml"
    prof = profile_at(profile)
    if rehearse and op and not example:
        from kernel_ratchet.profile.rehearsal import rehearsal_profile

        prof = rehearsal_profile(prof, op)
    opt = choose_optimizer(optimizer, agent_cmd, agent_timeout, knobs, queue)
    campaign = _check_start(prof, op, campaign, another, opt)
    what = f"op {op}" if op and not campaign else f"campaign {campaign}"
    ask = f"Run {what} unattended with the {optimizer} optimizer (up to {max_iterations} rounds)?"
    if not yes and not typer.confirm(ask, default=True):
        raise typer.Exit(1)
    _pause_note(op if pause and not campaign else None, max_iterations)
    _drive(
        prof,
        None if campaign else op,
        campaign,
        opt,
        max_iterations=max_iterations,
        max_duration=max_duration,
        efficiency_target=efficiency_target,
        init={"rehearsal": True} if rehearse else {},
        pause=pause,
        parallel=parallel,
        known_failure=known_failure,
    )


@app.command()
def resume(
    optimizer: str | None = typer.Option(
        None,
        help="search | agent | manual | queue (default: the optimizer of the campaign's last run)",
    ),
    max_iterations: int = typer.Option(20, help="rounds in this run"),
    max_duration: str | None = typer.Option(None, help="time budget, e.g. 2h, 90m"),
    agent_cmd: str | None = typer.Option(None, help="agent command template ({prompt_file})"),
    agent_timeout: float = typer.Option(1800.0, help="seconds per agent call"),
    efficiency_target: float | None = typer.Option(None, help="T2: fraction of the roofline"),
    knobs: str | None = KnobsOpt,
    queue: str | None = QueueOpt,
    pause: bool = PauseOpt,
    gpus: str | None = GpusOpt,
    workers: int = WorkersOpt,
    scheduler: str | None = SchedulerOpt,
    candidate_timeout: float = CandidateTimeoutOpt,
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Continue an interrupted or paused campaign (the round in flight is closed first) the
    way it was driven. Without --optimizer and --knobs: a campaign driven by an optimizer is
    driven by it again (its recorded optimizer and knobs; an agent's command is given again
    with --agent-cmd); a campaign driven by hand (`ratchet validate`) has its interrupted round
    closed and stops there: run `ratchet validate` again."""
    from kernel_ratchet.campaign.driver import driven_by_hand, recorded_driver
    from kernel_ratchet.campaign.locate import find_campaign

    parallel = Parallel(gpus, workers, scheduler, candidate_timeout)
    parallel.check()

    prof = profile_at(profile)
    cdir = find_campaign(prof, campaign)
    name = cdir.name
    if optimizer is None and knobs is None:
        if driven_by_hand(cdir):
            _close_by_hand(profile, name)
            return
        last = recorded_driver(cdir) or {}
        optimizer = last.get("name", "search")
        knobs = ",".join(last.get("knobs") or []) or None
        if optimizer == "queue":
            queue = queue or last.get("path")
        err.print(
            f"resuming with the {optimizer} optimizer of the last run"
            + (f", knobs {knobs}" if knobs else "")
        )
    opt = choose_optimizer(optimizer or "search", agent_cmd, agent_timeout, knobs, queue)
    _drive(
        prof,
        None,
        name,
        opt,
        max_iterations=max_iterations,
        max_duration=max_duration,
        efficiency_target=efficiency_target,
        init={},
        pause=pause,
        parallel=parallel,
    )


def _close_by_hand(profile: Path | None, name: str) -> None:
    """Resume of a campaign driven by hand: close the round in flight and stop."""
    from kernel_ratchet.cli.common import open_campaign
    from kernel_ratchet.cli.dashboard import after_round

    with open_campaign(profile, name) as c:
        closed = c.recover()
        if closed:
            after_round(c)
    what = (
        f"round-{closed.round} was closed as {closed.status.value} ({closed.category.value})"
        if closed
        else "no round was in flight"
    )
    out.print(
        f"campaign [bold]{escape(name)}[/bold] is driven by hand: {escape(what)}. Edit the "
        "kernel and run `ratchet validate --hypothesis ...` again (or give --optimizer "
        "search|agent to let an optimizer drive it)",
        markup=True,
    )
