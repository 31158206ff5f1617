"""The ``ratchet`` command: a thin layer over the profile and campaign APIs.

Exit codes (scripts may rely on them):
  0  success; for ``validate``, the round was ACCEPTED
  1  the command ran but its verdict is negative: a round ROLLED BACK, ``check`` found problems,
     ``accept`` failed
  2  any other kernel-ratchet error          3  ratchet.yaml problem
  4  benchmark CSV schema drift              5  campaign state does not allow the command
  6  another process drives the campaign     7  an append-only log was edited
  8  git problem                             130 interrupted (Ctrl+C); the round was closed
  143 terminated (SIGTERM); the round was closed
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernel_ratchet.errors import TERMINATION_REQUESTED, RatchetError, Terminated

app = typer.Typer(
    help="kernel-ratchet: disciplined GPU-kernel optimization campaigns.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tips_app = typer.Typer(help="Historical tips: show or add.", no_args_is_help=True)
app.add_typer(tips_app, name="tips")
out = Console()
err = Console(stderr=True)

ProfileOpt = typer.Option(None, "--profile", help="ratchet.yaml (default: found from the cwd)")
CampaignOpt = typer.Option(None, "--campaign", help="campaign name (default: most recent)")
PauseOpt = typer.Option(
    False,
    "--pause",
    help="when this run's --max-iterations or --max-duration is spent, pause "
    "(no REPORT; `ratchet resume` continues) instead of ending the campaign",
)
KnobsOpt = typer.Option(
    None,
    "--knobs",
    help="search only: comma-separated knobs it may move (e.g. "
    "block_m,block_n,num_warps,num_stages, the space of an exhaustive sweep)",
)


def _profile(path: Path | None):
    from kernel_ratchet.profile.loader import find_profile, load_profile

    return load_profile(path if path else find_profile(Path.cwd()))


@contextmanager
def _progress() -> Iterator:
    with err.status("working...") as status:

        def say(msg: str) -> None:
            err.print(f"[dim]{msg}[/dim]")
            status.update(msg)

        yield say


@contextmanager
def _campaign(profile_path: Path | None, name: str | None):
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.locate import find_campaign

    prof = _profile(profile_path)
    with _progress() as say, Campaign(prof, find_campaign(prof, name), say=say) as c:
        yield c


@app.command()
def check(op: str | None = typer.Option(None, "--op"), profile: Path | None = ProfileOpt):
    """Validate ratchet.yaml and run the DEFINE_TARGET checklist and the environment check."""
    from kernel_ratchet.profile.checklist import device_check, env_check, git_check, run_checklist

    prof = _profile(profile)
    items = [*run_checklist(prof, op), env_check(prof), git_check(prof.root)]
    items += [device_check(prof, o) for o in ([op] if op else list(prof.ops))]
    table = Table("check", "ok", "detail / fix")
    for i in items:
        detail = i.detail + (f"\n[yellow]fix:[/yellow] {i.fix}" if not i.ok and i.fix else "")
        table.add_row(i.name, "[green]yes[/green]" if i.ok else "[red]NO[/red]", detail)
    out.print(table)
    bad = [i for i in items if not i.ok]
    out.print(f"{len(items) - len(bad)}/{len(items)} checks pass ({prof.path})")
    raise typer.Exit(1 if bad else 0)


@app.command()
def init(
    op: str = typer.Option(..., "--op", help="op name from ratchet.yaml"),
    performance_target: float | None = typer.Option(None, help="T1: aggregate to reach"),
    max_iterations: int = typer.Option(20, help="T3: rounds after the baseline (< 120)"),
    git_branch: str = typer.Option("auto", help="auto: branch optimize/<campaign>; none"),
    commit: bool = typer.Option(True, "--commit/--no-commit", help="commit accepted rounds"),
    timing_engine: str | None = typer.Option(None, help="perf_counter | cuda_events"),
    regression_threshold: float = typer.Option(0.05, help="per-shape regression gate"),
    efficiency_target: float | None = typer.Option(None, help="T2: fraction of the peak"),
    hardware_peak: float | None = typer.Option(None, help="T2: peak in the primary unit"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    mode: str | None = typer.Option(None, "--mode", help="repo | workspace (default: profile)"),
    profile: Path | None = ProfileOpt,
):
    """DEFINE_TARGET + PREPARE_ENVIRONMENT + READ_HISTORICAL_TIPS: create a campaign."""
    from kernel_ratchet.campaign.create import create_campaign, define_target, preflight

    prof = _profile(profile)
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
    )
    table = Table("parameter", "value", title="DEFINE_TARGET")
    for k, v in params.describe():
        table.add_row(k, v)
    out.print(table)
    preflight(prof, op)
    if not yes and not typer.confirm("Create this campaign?", default=True):
        raise typer.Exit(1)
    cdir = create_campaign(prof, params)
    out.print(f"campaign [bold]{cdir.name}[/bold] created in {cdir}")
    out.print("next: `ratchet baseline`")


@app.command()
def baseline(profile: Path | None = ProfileOpt, campaign: str | None = CampaignOpt):
    """BASELINE (round-1): focused test and harness on all target shapes."""
    with _campaign(profile, campaign) as c:
        rec = c.baseline()
        reps = ", ".join(c.m.representative_shapes)
    out.print(f"round-1 BASELINE: {rec.reason}\nrepresentative shapes: {reps}")


@app.command()
def validate(
    hypothesis: str = typer.Option(..., help="the round's single hypothesis, stated up front"),
    bucket: str = typer.Option("K1", help="transfer bucket K1..K4, W1..W3 (SPEC section 8)"),
    level: str = typer.Option("quick", help="quick (representative) or full (all shapes)"),
    change: str = typer.Option("", help="the single change, in one line"),
    expected: str = typer.Option("", help="the expected effect"),
    lesson: str = typer.Option("", help="lesson, if the round is rolled back"),
    next_direction: str = typer.Option("", "--next", help="what to try next"),
    takeaway: str = typer.Option("", help="a reusable tip to append to the tips file"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """VALIDATE the working-tree change against the incumbent; ACCEPT (commit) or ROLL BACK."""
    with _campaign(profile, campaign) as c:
        rec = c.validate(
            hypothesis,
            bucket=bucket,
            level=level,
            change=change,
            expected=expected,
            lesson=lesson,
            next_direction=next_direction,
            takeaway=takeaway,
        )
        k = c.state.consecutive_rollbacks
        term = c.state.termination
    color = "green" if rec.accepted else "red"
    status = rec.status.value
    out.print(f"round-{rec.round} [{color}]{status}[/{color}] ({rec.level}): {rec.reason}")
    if not rec.accepted:
        out.print(f"root cause: {rec.category.root_cause}")
    if k >= 2:
        err.print(
            f"[yellow]stagnation: {k} consecutive rollbacks — review before the next "
            "round (see logs/optimize.md)[/yellow]"
        )
    if term:
        out.print(f"termination {term.code}: {term.reason} — run `ratchet report`")
    raise typer.Exit(0 if rec.accepted else 1)


@app.command()
def status(
    as_json: bool = typer.Option(False, "--json"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Where the campaign stands (finishes an interrupted round first)."""
    with _campaign(profile, campaign) as c:
        c.recover()
        s = c.status()
    if as_json:
        print(json.dumps(s, indent=2, default=str))
        return
    out.print(
        f"[bold]{s['campaign']}[/bold] — {s['phase']}, next round {s['next_round']}, "
        f"incumbent round-{s['incumbent_round']}"
    )
    table = Table(
        "round",
        "status",
        "level",
        "vs baseline\n(paired chain)",
        "vs baseline\n(harness CSVs)",
        "hypothesis",
    )
    for r in s["rounds"]:
        vp, vb = r.get("paired_chain"), r.get("vs_baseline")
        table.add_row(
            str(r["round"]),
            r["status"],
            r["level"],
            "-" if vp is None else f"{vp * 100:+.2f}%",
            "-" if vb is None else f"{vb * 100:+.2f}%",
            r["hypothesis"],
        )
    out.print(table)
    if s["termination"]:
        out.print(f"termination {s['termination']['code']}: {s['termination']['reason']}")


@app.command()
def report(profile: Path | None = ProfileOpt, campaign: str | None = CampaignOpt):
    """REPORT: full validation of the incumbent and the final report (ends the campaign)."""
    from kernel_ratchet.campaign.finish import report as do_report

    with _campaign(profile, campaign) as c:
        text = do_report(c)
        where = c.dir / "report.md"
    out.print(text)
    out.print(f"written to {where}")


@app.command()
def accept(profile: Path | None = ProfileOpt, campaign: str | None = CampaignOpt):
    """ACCEPTANCE: full test suite and a diff that touches only kernel files."""
    from kernel_ratchet.campaign.finish import accept as do_accept

    with _campaign(profile, campaign) as c:
        res = do_accept(c)
    for line in res["details"]:
        out.print(line)
    out.print("[green]ACCEPTED[/green]" if res["ok"] else "[red]ACCEPTANCE FAILED[/red]")
    raise typer.Exit(0 if res["ok"] else 1)


@app.command("parse-csv")
def parse_csv(path: Path, as_json: bool = typer.Option(False, "--json")):
    """Parse a benchmark CSV with the one reader (schema detected and checked)."""
    from kernel_ratchet.harness.csv_schema import read_csv

    t = read_csv(path)
    if as_json:
        print(json.dumps({"schema": t.schema.name, "rows": t.to_records()}, indent=2))
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
    path = _tips_file(_profile(profile), op, gpu)
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
    path = _tips_file(_profile(profile), op, gpu)
    out.print(add_tip(path, round_no, status_, context, signal, takeaway, applicability))


@app.command("sync-back")
def sync_back(
    commit: bool = typer.Option(True, "--commit/--no-commit", help="commit the kernel files"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Workspace-mode: apply the accepted kernel change to the project and re-validate it there."""
    from kernel_ratchet.campaign.workspace import sync_back as do_sync

    with _campaign(profile, campaign) as c:
        res = do_sync(c, commit=commit)
    for line in res.details:
        out.print(line)
    out.print("[green]SYNCED[/green]" if res.ok else "[red]SYNC-BACK FAILED[/red]")
    raise typer.Exit(0 if res.ok else 1)


@app.command("mcp")
def mcp_server(profile: Path | None = ProfileOpt):
    """Serve the campaign tools over MCP (stdio) for an editor agent (needs the mcp extra)."""
    from kernel_ratchet.mcp.server import serve

    serve(profile)


@contextmanager
def _live_view(title: str) -> Iterator:
    """A live table of the rounds of ``ratchet run`` (stderr); yields (say, on_round)."""
    from rich.live import Live

    rows: list = []
    state = {"msg": "starting"}

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
                f"[{color}]{r.status.value}[/{color}]",
                r.category.value,
                "-" if r.gain is None else f"{r.gain * 100:+.2f}%",
                r.summary or r.hypothesis,
            )
        return t

    with Live(render(), console=err, refresh_per_second=4) as live:

        def say(msg: str) -> None:
            state["msg"] = msg
            stamp = time.strftime("%H:%M:%S")  # local time, as every record's timestamps
            live.console.print(f"[dim]{stamp} {msg}[/dim]", highlight=False)
            live.update(render())

        def on_round(rec) -> None:
            rows.append(rec)
            live.update(render())

        yield say, on_round


def _optimizer(name: str, agent_cmd: str | None, agent_timeout: float, knobs: str | None = None):
    from kernel_ratchet.optimizers.base import load_optimizer

    if knobs and name != "search":
        raise RatchetError(
            f"--knobs restricts the search optimizer; --optimizer {name} has none to restrict "
            "(drop --knobs or use --optimizer search)"
        )
    if knobs:
        return load_optimizer("search", knobs=knobs)
    if name == "agent":
        if not agent_cmd:
            raise RatchetError(
                "--optimizer agent needs --agent-cmd, a command template with "
                "{prompt_file} (and optionally {workdir}, {hypothesis_file}), "
                "e.g. --agent-cmd 'claude -p \"$(cat {prompt_file})\"'"
            )
        return load_optimizer("agent", command=agent_cmd, timeout_s=agent_timeout)
    return load_optimizer(name)


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
) -> None:
    import threading

    from kernel_ratchet.campaign.loop import graceful_interrupt, parse_duration, run_campaign

    stop = threading.Event()
    title = f"ratchet run ({optimizer.name})"
    with _live_view(title) as (say, on_round), graceful_interrupt(stop, say):
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
        )
    if getattr(optimizer, "instructions", ""):
        out.print(optimizer.instructions)
    code, why = res.stop or ("-", "-")
    acc = sum(1 for r in res.rounds if r.accepted)
    out.print(
        f"campaign [bold]{res.campaign_dir.name}[/bold]: {len(res.rounds)} rounds this "
        f"run, {acc} accepted; stopped: {code} — {why}"
    )
    if res.report is not None:
        out.print(f"report: {res.campaign_dir / 'report.md'} (next: `ratchet accept`)")


@app.command()
def run(
    op: str | None = typer.Option(None, "--op", help="op name from ratchet.yaml (new campaign)"),
    optimizer: str = typer.Option("search", help="search | agent | manual"),
    max_iterations: int = typer.Option(20, help="rounds after the baseline (T3, < 120)"),
    max_duration: str | None = typer.Option(None, help="time budget, e.g. 2h, 90m"),
    agent_cmd: str | None = typer.Option(None, help="agent command template ({prompt_file})"),
    agent_timeout: float = typer.Option(1800.0, help="seconds per agent call"),
    example: str | None = typer.Option(None, help="scaffold a kernel-pack op (or 'tiny')"),
    dest: Path | None = typer.Option(None, help="where --example scaffolds its project"),
    rehearse: bool = typer.Option(False, help="CPU: Triton interpreter, tiny shapes"),
    efficiency_target: float | None = typer.Option(None, help="T2: fraction of the roofline"),
    knobs: str | None = KnobsOpt,
    pause: bool = PauseOpt,
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Run a whole campaign unattended: init, BASELINE, rounds proposed by the optimizer, REPORT.

    First Ctrl+C: finish the current round and write the report; second: stop at once
    (`ratchet resume` continues). `--pause`: a spent budget of this run pauses instead of
    ending the campaign (a campaign split over machine sessions)."""
    import os

    import torch

    if example or rehearse:
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
                "the timings are meaningless for tuning[/yellow]"
            )
    if example:
        from kernel_ratchet.campaign.example import scaffold

        root, op = scaffold(
            example, dest or Path.cwd() / f"ratchet-example-{example}", rehearse=rehearse
        )
        paths = [str(root), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        out.print(
            f"scaffolded [bold]{root}[/bold] (op {op}); later commands there need "
            f"`export PYTHONPATH={root}` or `pip install -e {root}`"
        )
        profile = root / "ratchet.yaml"
    prof = _profile(profile)
    if not op and not campaign:
        raise RatchetError(
            "give --op OP for a new campaign (or --campaign NAME / `ratchet "
            "resume` to continue one)"
        )
    opt = _optimizer(optimizer, agent_cmd, agent_timeout, knobs)
    what = f"op {op}" if op and not campaign else f"campaign {campaign}"
    ask = f"Run {what} unattended with the {optimizer} optimizer (up to {max_iterations} rounds)?"
    if not yes and not typer.confirm(ask, default=True):
        raise typer.Exit(1)
    _drive(
        prof,
        None if campaign else op,
        campaign,
        opt,
        max_iterations=max_iterations,
        max_duration=max_duration,
        efficiency_target=efficiency_target,
        init={},
        pause=pause,
    )


@app.command()
def resume(
    optimizer: str | None = typer.Option(
        None, help="search | agent | manual (default: the optimizer of the campaign's last run)"
    ),
    max_iterations: int = typer.Option(20, help="rounds in this run"),
    max_duration: str | None = typer.Option(None, help="time budget, e.g. 2h, 90m"),
    agent_cmd: str | None = typer.Option(None, help="agent command template ({prompt_file})"),
    agent_timeout: float = typer.Option(1800.0, help="seconds per agent call"),
    efficiency_target: float | None = typer.Option(None, help="T2: fraction of the roofline"),
    knobs: str | None = KnobsOpt,
    pause: bool = PauseOpt,
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Continue an interrupted or paused `ratchet run` (the round in flight is closed first).
    Without --optimizer and --knobs, the campaign is driven as its last run was (its recorded
    optimizer and knobs; an agent's command is given again with --agent-cmd), or by the search
    after a manual run."""
    from kernel_ratchet.campaign.locate import find_campaign
    from kernel_ratchet.campaign.loop import recorded_optimizer

    prof = _profile(profile)
    cdir = find_campaign(prof, campaign)
    name = cdir.name
    last = recorded_optimizer(cdir) or {}
    if optimizer is None and knobs is None and last and last.get("name") != "manual":
        optimizer = last.get("name", "search")
        knobs = ",".join(last.get("knobs") or []) or None
        err.print(
            f"resuming with the {optimizer} optimizer of the last run"
            + (f", knobs {knobs}" if knobs else "")
        )
    opt = _optimizer(optimizer or "search", agent_cmd, agent_timeout, knobs)
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
    )


@app.command()
def calibrate(
    trials: int = typer.Option(20, help="A/A trials (incumbent against itself)"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """A/A runs on the representative shapes: false-accept rate and minimum detectable effect
    of this machine; no smaller gain is claimed afterwards."""
    from kernel_ratchet.campaign.calibrate import calibrate_campaign

    with _campaign(profile, campaign) as c:
        cal = calibrate_campaign(c, trials)
    out.print(
        f"{cal.trials} A/A trials: false accepts {cal.false_accept_rate:.1%}, false "
        f"regressions {cal.false_regression_rate:.1%}, minimum detectable effect "
        f"{cal.min_detectable_effect:.2%}"
    )


def _terminate(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    TERMINATION_REQUESTED.set()
    raise Terminated("SIGTERM")


def _stopped(terminated: bool) -> None:
    """Exit after Ctrl+C (130) or SIGTERM (143); the engine has closed the round in flight."""
    if terminated:
        err.print(
            "[yellow]terminated (SIGTERM)[/yellow]: the round in flight was closed; "
            "`ratchet resume` continues the campaign"
        )
        sys.exit(Terminated.exit_code)
    err.print(
        "[yellow]interrupted[/yellow]: the round in flight was closed; `ratchet status` shows it"
    )
    sys.exit(130)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        # returns typer.Exit's code in this mode; typer turns a KeyboardInterrupt (Ctrl+C, or
        # Terminated) raised in a command into a return of 130 (typer 0.29)
        rc = app(standalone_mode=False)
        terminated = TERMINATION_REQUESTED.is_set()  # also a Terminated lost in a finalizer
        if rc == 130 or terminated:
            _stopped(terminated)
        sys.exit(rc if isinstance(rc, int) else 0)
    except RatchetError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:  # a typer that lets it through
        _stopped(isinstance(exc, Terminated))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, SystemExit):
        raise
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
