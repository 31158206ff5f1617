"""The campaign's commands: ``baseline``, ``validate``, ``status``, ``report``, ``close``,
``analyze``, ``accept`` and ``calibrate``, each over the campaign API under the campaign lock."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from kernel_ratchet.campaign.driver import MANUAL, record_driver
from kernel_ratchet.campaign.render import time_line
from kernel_ratchet.cli.common import (
    CampaignOpt,
    ProfileOpt,
    app,
    err,
    open_campaign,
    out,
    profile_at,
)
from kernel_ratchet.cli.dashboard import after_round

#: ``ratchet status``: the characters it shows of a hypothesis, on its own line below the table
#: (the whole text is in the round's summary and ``status --json``).
HYPOTHESIS_CHARS = 160


@app.command()
def baseline(
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
    known_failure: str | None = typer.Option(
        None,
        help="the unmodified kernel fails its focused test, or the harness's check on every "
        "shape, on the bug this campaign's `validate --fix` is to fix, and this says which: "
        "the baseline is taken and records the failure; every later round must pass the whole "
        "test, and with no shape passing only --fix rounds may follow",
    ),
):
    """BASELINE (round-1): focused test and harness on all target shapes."""
    if known_failure is not None and (not known_failure.strip() or "\n" in known_failure):
        raise typer.BadParameter("say which failure, in one line", param_hint="--known-failure")
    with open_campaign(profile, campaign) as c:
        record_driver(c.dir, {"name": MANUAL})
        rec = c.baseline(known_failure)
        after_round(c)
        reps = ", ".join(c.m.representative_shapes)
    out.print(f"round-1 BASELINE: {rec.reason}\nrepresentative shapes: {reps}")


#: ``validate --patch``.
PatchOpt = typer.Option(
    None,
    "--patch",
    help="the round's change as a unified diff of kernel files (`git diff > FILE`), applied "
    "to the incumbent first; taken back if the round refuses to start",
)


@app.command()
def validate(
    hypothesis: str = typer.Option(..., help="the round's single hypothesis, stated up front"),
    bucket: str = typer.Option("K1", help="transfer bucket K1..K4, W1..W3 (docs/transfer.md)"),
    level: str = typer.Option("quick", help="quick (representative) or full (all shapes)"),
    change: str = typer.Option("", help="the single change, in one line"),
    expected: str = typer.Option("", help="the expected effect"),
    lesson: str = typer.Option("", help="lesson, if the round is rolled back"),
    next_direction: str = typer.Option("", "--next", help="what to try next"),
    takeaway: str = typer.Option("", help="a reusable tip to append to the tips file"),
    rehearse: bool = typer.Option(
        False, help="a CPU rehearsal round: Triton interpreter, labelled, never committed"
    ),
    test_shared: bool = typer.Option(
        False,
        "--test-shared",
        help="also run the focused tests of the other ops whose kernel_source lists a file "
        "this round changed; the round fails on the first that fails",
    ),
    fix: bool = typer.Option(
        False,
        "--fix",
        help="a correctness fix: accepted when the paired A/B finds it not slower, or, where "
        "the incumbent passes no shape, on correctness alone at the full level",
    ),
    patch: Path | None = PatchOpt,
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """VALIDATE the working-tree change (or --patch's) against the incumbent; ACCEPT (commit)
    or ROLL BACK. A round of a rehearsal campaign (or with --rehearse) is labelled REHEARSAL
    and rolled back whatever its timings say."""
    from kernel_ratchet.campaign.candidate_patch import validate_patch

    with open_campaign(profile, campaign) as c:
        record_driver(c.dir, {"name": MANUAL})
        if rehearse:
            os.environ["TRITON_INTERPRET"] = "1"  # the round's steps inherit it
        rec = validate_patch(
            c,
            hypothesis,
            patch,
            bucket=bucket,
            level=level,
            rehearse=rehearse,
            test_shared=test_shared,
            fix=fix,
            change=change,
            expected=expected,
            lesson=lesson,
            next_direction=next_direction,
            takeaway=takeaway,
        )
        after_round(c)
        k = c.state.consecutive_rollbacks
        term = c.state.termination
    _closing(rec, k, term)
    raise typer.Exit(0 if rec.accepted else 1)


def _closing(rec, rollbacks: int, term) -> None:
    """What a closed round prints: its line, the root cause of a roll-back, stagnation and
    termination."""
    out.print(round_line(rec), markup=True)
    if not rec.accepted:
        out.print(f"root cause: {rec.category.root_cause}")
    if rollbacks >= 2:
        err.print(
            f"[yellow]stagnation: {rollbacks} consecutive rollbacks — review before the next "
            "round (see logs/optimize.md)[/yellow]",
            markup=True,
        )
    if term:
        out.print(f"termination {term.code}: {term.reason} — run `ratchet report`")


def _peek(profile: Path | None, campaign: str | None, busy: str) -> dict:
    """The status of a campaign another process holds, read without its lock."""
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.locate import find_campaign
    from kernel_ratchet.campaign.status import campaign_status

    prof = profile_at(profile)
    ctx = Campaign(prof, find_campaign(prof, campaign)).ctx
    return {**campaign_status(ctx, verify=False), "driven_by": busy.split(";")[0]}


@app.command()
def status(
    as_json: bool = typer.Option(False, "--json"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """Where the campaign stands (finishes an interrupted round first). While another process
    drives it, a read-only look: nothing finished, the records not verified."""
    from kernel_ratchet.campaign.status import campaign_status, round_now
    from kernel_ratchet.errors import LockError

    try:
        with open_campaign(profile, campaign) as c:
            c.recover()
            s = campaign_status(c.ctx)
    except LockError as busy:
        s = _peek(profile, campaign, str(busy))
    if as_json:
        from kernel_ratchet.mcp.tools import jsonable

        print(json.dumps(jsonable(s), indent=2, default=str, allow_nan=False))
        return
    if s.get("driven_by"):
        err.print(f"read-only: {s['driven_by']}", highlight=False, soft_wrap=True)
    out.print(
        f"[bold]{escape(s['campaign'])}[/bold] — "
        + escape(f"{s['phase']}, {round_now(s)}, ")
        + (f"incumbent round-{r}" if (r := s["incumbent_round"]) else "no incumbent (no baseline)")
        + (" — REHEARSAL (interpreter timings; nothing committed)" if s.get("rehearsal") else ""),
        markup=True,
    )
    out.print(_rounds_table(s["rounds"]))
    _below_table(s)


def _rounds_table(rounds: list[dict]) -> Table:
    """``ratchet status``'s table: a row per closed round."""
    table = Table(
        "round",
        "status",
        "level",
        "vs baseline\n(paired chain)",
        "vs baseline\n(harness CSVs)",
        "wall time (s) per step",
    )
    for r in rounds:
        whose = " (candidate, rolled back)" if r["status"] == "ROLLED BACK" else ""
        vp, vb = r.get("paired_chain"), r.get("vs_baseline")
        cat = r.get("category")
        why = f" ({cat})" if cat not in (None, "ok", "baseline", "rehearsal") else ""
        table.add_row(
            str(r["round"]),
            (r.get("rehearsal") or r["status"]) + why,
            r["level"],
            "-" if vp is None else f"{vp * 100:+.2f}%{whose}{_from(r)}",
            "-" if vb is None else f"{vb * 100:+.2f}%{whose}",
            time_line(r["seconds"]) if r.get("seconds") else "-",
        )
    return table


def _below_table(s: dict) -> None:
    """What ``ratchet status`` prints below its table, unwrapped or at the terminal's width:
    where paired chains count from, each round's hypothesis, the termination."""
    origins = sorted({n for r in s["rounds"] if (n := r.get("chain_from") or 1) != 1})
    for n in origins:
        out.print(
            f"paired chains after round-{n} count from it: a fix accepted on correctness "
            "alone, past which no pair reaches back",
            soft_wrap=True,
        )
    for r in s["rounds"]:
        shown = textwrap.shorten(r["hypothesis"], HYPOTHESIS_CHARS, placeholder=" …")
        out.print(f"round-{r['round']}: {shown}")
    if s["termination"]:
        out.print(f"termination {s['termination']['code']}: {s['termination']['reason']}")


def _from(row: dict) -> str:
    """Where a paired chain counts from when not the BASELINE: a fix accepted on correctness
    alone, past which no pair reaches back."""
    n = row.get("chain_from") or 1
    return "" if n == 1 else f" from round-{n}"


@app.command()
def report(profile: Path | None = ProfileOpt, campaign: str | None = CampaignOpt):
    """REPORT: full validation of the incumbent and the final report (ends the campaign)."""
    from kernel_ratchet.report.final import report as do_report

    with open_campaign(profile, campaign) as c:
        done = do_report(c)
        after_round(c)
        where = c.dir / "report.md"
    out.print(done.text)
    out.print(f"written to {where}")
    if done.branch:
        out.print(escape(done.branch), highlight=False, soft_wrap=True)


@app.command()
def close(
    reason: str = typer.Option(..., "--reason", help="why the campaign ends unreported"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """CLOSE a campaign that cannot be reported (its baseline or the incumbent's full validation
    fails): T4 with the reason, a report without a final table, every record kept. Acceptance
    refuses it; `ratchet init` no longer counts it as open."""
    from kernel_ratchet.report.final import close as do_close

    with open_campaign(profile, campaign) as c:
        closed = do_close(c, reason)
        after_round(c)
        where = c.dir / "report.md"
    out.print(closed.text)
    out.print(f"written to {where}")
    if closed.branch:
        out.print(escape(closed.branch), highlight=False, soft_wrap=True)


@app.command()
def analyze(
    with_profile: bool = typer.Option(
        True,
        "--profile-run/--no-profile-run",
        help="also profile the least efficient representative shape (a profiler process; "
        "Nsight Compute where ncu works)",
    ),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """ANALYZE the incumbent: its latest harness run against this machine's measured ceilings
    (bound and fraction of the roofline per shape) and where one step's time goes; written to
    profiles/round-<next>/analysis.md. Measures, decides nothing: no round is recorded."""
    from kernel_ratchet.campaign.analyze import NOT_ASKED, analyze_campaign

    with open_campaign(profile, campaign) as c:
        n = c.state.next_round
        analyze_campaign(c.ctx, n, profile=with_profile, why_not=NOT_ASKED)
        where = c.dir / "profiles" / f"round-{n}" / "analysis.md"
    out.print(where.read_text())
    out.print(f"written to {where}")


@app.command()
def accept(profile: Path | None = ProfileOpt, campaign: str | None = CampaignOpt):
    """ACCEPTANCE: full test suite and a diff that touches only kernel files."""
    from kernel_ratchet.campaign.acceptance import accept as do_accept

    with open_campaign(profile, campaign) as c:
        res = do_accept(c.ctx)
        after_round(c)
    for line in res.details:
        out.print(line)
    out.print("[green]ACCEPTED[/green]" if res.ok else "[red]ACCEPTANCE FAILED[/red]", markup=True)
    raise typer.Exit(0 if res.ok else 1)


@app.command()
def calibrate(
    trials: int = typer.Option(20, help="A/A trials (incumbent against itself)"),
    profile: Path | None = ProfileOpt,
    campaign: str | None = CampaignOpt,
):
    """A/A runs on the representative shapes: false-accept rate and minimum detectable effect
    of this machine; no smaller gain is claimed afterwards."""
    from kernel_ratchet.campaign.calibrate import calibrate_campaign

    with open_campaign(profile, campaign) as c:
        cal = calibrate_campaign(c, trials)
    out.print(
        f"{cal.trials} A/A trials: false accepts {cal.false_accept_rate:.1%}, false "
        f"regressions {cal.false_regression_rate:.1%}, minimum detectable effect "
        f"{cal.min_detectable_effect:.2%}"
    )


def round_line(rec) -> str:
    """A closed round as ``validate`` prints it (markup, ``markup=True``): number, status,
    level and reason, escaped (a rehearsal's reason opens with its label, said once)."""
    color = "green" if rec.accepted else "yellow" if rec.rehearsal else "red"
    status = rec.label
    head = f"round-{rec.round} [{color}]{escape(status)}[/{color}] ({rec.level})"
    if rec.reason.startswith(status):
        return f"{head}{escape(rec.reason[len(status) :])}"
    return f"{head}: {escape(rec.reason)}"
