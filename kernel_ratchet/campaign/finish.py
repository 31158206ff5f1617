"""REPORT and ACCEPTANCE: the end of a campaign.

``report`` measures the incumbent on the full target set, compares it with the baseline shape by
shape, and appends the final sections to ``logs/optimize.md`` (current best, directions to try,
verified-ineffective directions, termination check, final report); it ends the campaign (T4
when no other condition held). ``accept`` goes back to the project: the full test suite must
pass and the diff against the starting commit must touch only kernel files.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign import closing, git, rounds
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.create import harness_command
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.record import read_record
from kernel_ratchet.campaign.records import num, pct
from kernel_ratchet.campaign.state import ClosedEntry, Phase, Termination
from kernel_ratchet.campaign.steps import run_step
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.guard import RoundGain, attribute_gain
from kernel_ratchet.scoring.chain import check_chain
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates, score_vector

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign


def _ended_rounds(c: Campaign, status: Status) -> list[ClosedEntry]:
    return [r for r in c.state.closed if r.status is status]


def _final_table(c: Campaign):
    rdir = c.dir / "report"
    csv = rdir / "benchmark_full.csv"
    c.say("REPORT: full validation of the incumbent on all target shapes")
    h = run_step(
        "harness",
        harness_command(c.dir, "full", csv),
        cwd=c.root,
        log_path=rdir / "harness.log",
        timeout_s=rounds.HARNESS_TIMEOUT_S,
    )
    if not h.ok or not csv.exists():
        raise CampaignError(f"REPORT: the full validation of the incumbent failed: {h.reason}")
    rounds.write_provenance(c, rdir, "full")
    return c.table(c.rel(csv))


def report(c: Campaign, stop: tuple[str, str] | None = None) -> str:
    """Write the final report (idempotent once written); returns its text.

    ``stop`` = (code, reason) records why a driver ends a campaign that no termination
    condition ended yet (default: T4, the user asked to stop).
    """
    c.recover()
    path = c.dir / "report.md"
    if c.state.phase in (Phase.TERMINATED, Phase.ACCEPTED) and path.exists():
        return path.read_text()
    if c.state.phase is not Phase.OPTIMIZING:
        raise CampaignError("no baseline yet: nothing to report (run `ratchet baseline`)")
    if rounds.kernel_changed(c):
        raise CampaignError(
            "the kernel files hold a change that no round validated; run `ratchet validate` "
            "on it or restore the incumbent's files before the report"
        )
    if not c.state.termination:
        code, why = stop or ("T4", "the user asked to stop (ratchet report)")
        c.state.termination = Termination(code, now(), why)
        c.log("logs/optimize.md").append(
            f"## Termination check\n{code} at {c.state.termination.at}: "
            f"{c.state.termination.reason}\n\n"
        )
        c.save()
    final = _final_table(c)
    text = _render(c, final)
    opt = c.log("logs/optimize.md")
    if not opt.contains("## Final report"):
        opt.append(text)
    atomic_write_text(path, text)
    c.state.phase = Phase.TERMINATED
    c.save()
    return text


def _render(c: Campaign, final) -> str:
    ct = c.m.campaign_type
    base_t = c.baseline_table()
    base, cur = score_vector(base_t, ct), score_vector(final, ct)
    b_agg, f_agg = aggregates(base_t, ct).primary_avg, aggregates(final, ct).primary_avg
    gain = f_agg / b_agg - 1.0 if b_agg > 0 else math.nan
    acc = _ended_rounds(c, Status.ACCEPTED)
    rolled = _ended_rounds(c, Status.ROLLED_BACK)
    # an interrupted, scope or harness rollback says nothing about its direction
    rej = [r for r in rolled if r.verified_ineffective]
    open_ = [r for r in rolled if not r.verified_ineffective]
    inc = c.state.closed_round(c.state.incumbent_round or 1)
    nexts = _next_directions(c)
    kept = [r for r in c.state.closed if r.status is not Status.ROLLED_BACK]
    chain = check_chain([(r.round, 1.0 + (r.vs_baseline or 0.0)) for r in kept])
    rows = "\n".join(
        f"| {lbl} | {num(base.get(lbl))} | {num(cur.get(lbl))} | "
        f"{pct((cur[lbl] / base[lbl] - 1) if lbl in cur and base.get(lbl) else None, 2)} |"
        for lbl in [s["label"] for s in c.m.target_shapes]
    )
    links = "\n".join(
        f"- round-{r.round} ({r.status.value}): rounds/round-{r.round}/summary.md"
        for r in c.state.closed
    )
    term = c.state.termination
    commit = (inc.commit if inc else None) or c.state.incumbent_commit or "-"
    return (
        f"## Current best\nround-{c.state.incumbent_round} (commit {commit}): "
        f"{inc.hypothesis if inc else None}\n\n## Directions to try\n"
        + ("".join(f"- {d}\n" for d in nexts[:3]) or "- none recorded by the driver\n")
        + "\n## Verified-ineffective directions\n"
        + (
            "".join(f"- round-{r.round}: {r.hypothesis} ({r.category.value})\n" for r in rej)
            or "- none\n"
        )
        + (
            "\n## Rolled back without a verdict (not ineffective: may be tried again)\n"
            + "".join(f"- round-{r.round}: {r.hypothesis} ({r.category.value})\n" for r in open_)
            if open_
            else ""
        )
        + f"\n## Final report ({now()})\n"
        f"Termination: {term.code if term else None} — {term.reason if term else None}\n\n"
        f"Full validation ({len(c.m.target_shapes)} shapes, {c.m.primary_metric}):\n\n"
        "| Shape | Baseline | Final | Gain |\n|---|---|---|---|\n" + rows + "\n\n"
        f"- Total gain: {num(b_agg)} -> {num(f_agg)} ({pct(gain, 2)}; the full validation "
        "against the BASELINE's, two single harness measurements taken at different times)\n"
        f"- Paired chain: {_paired_chain(c, acc)}\n"
        f"- Effective directions: {'; '.join(r.hypothesis for r in acc) or 'none'}\n"
        f"- Ineffective directions: {'; '.join(r.hypothesis for r in rej) or 'none'}\n"
        f"- Chain integrity: {'intact' if not chain else '; '.join(chain)}\n"
        "- Top three next steps: re-profile the largest shape; revisit the most promising "
        "rolled-back direction with a different approach; compare with the vendor library\n"
        f"- Real-training audit: {_real_training(c, gain)}\n\nRound summaries:\n" + links + "\n\n"
    )


def _paired_chain(c: Campaign, acc: list[ClosedEntry]) -> str:
    """The incumbent's paired chain (:func:`closing.chain_of`, as ``ratchet status`` and T1 read
    it: the gain the decisions stand on) and the accepted rounds' paired ratios behind it, each
    against its incumbent with its CI, on the shapes each round measured."""
    parts = []
    for r in acc:
        d = read_record(c.round_dir(r.round) / "round.json").decision
        if d is None or not d.paired:
            return "none (an accepted round has no paired A/B)"
        lo, hi = d.gain_ci
        parts.append(
            f"round-{r.round} {1 + d.gain:.4f}x [{1 + lo:.4f}, {1 + hi:.4f}] on "
            f"{len(d.per_shape)} shapes"
        )
    if not parts:
        return "no accepted round"
    return f"{pct(closing.chain_of(c, c.state.incumbent_round or 1), 2)} ({'; '.join(parts)})"


def _real_training(c: Campaign, headline: float) -> str:
    """S_real / W_real / R_real of the accepted chain and the inflation gap (SPEC section 8)."""
    gains = []
    for r in c.state.closed:
        if r.status is not Status.ACCEPTED:
            continue
        rec = read_record(c.round_dir(r.round) / "round.json")
        t = closing.transfer_of(rec)
        bucket = rec.transfer_static.bucket if rec.transfer_static else rec.bucket
        decision = t.get("Decision", "ACCEPT-as-real").split()[0]
        gains.append(RoundGain(r.round, bucket, decision, float(r.gain or 0.0)))
    a = attribute_gain(gains, headline=headline if math.isfinite(headline) else None)
    return a.text


def _next_directions(c: Campaign) -> list[str]:
    """The drivers' stated next directions, newest first, without repeats."""
    out: list[str] = []
    for r in reversed(c.state.closed):
        path = c.round_dir(r.round) / "round.json"
        nd = read_record(path).next_direction if path.exists() else ""
        if nd and nd not in out:
            out.append(nd)
    return out


def accept(c: Campaign) -> dict[str, Any]:
    """ACCEPTANCE: full_test passes and the diff since the start touches only kernel files."""
    if c.state.phase is Phase.OPTIMIZING:
        raise CampaignError("run `ratchet report` first: acceptance reviews a finished campaign")
    if c.state.phase is not Phase.TERMINATED and c.state.phase is not Phase.ACCEPTED:
        raise CampaignError("the campaign has no report yet")
    log = c.dir / "report" / "full_test.log"
    c.say(f"ACCEPTANCE: {c.profile.full_test}")
    t = run_step("full test", c.profile.full_test, cwd=c.profile.root, log_path=log, timeout_s=7200)
    changed = git.git(c.groot, "diff", "--name-only", c.m.starting_commit or "HEAD", "HEAD")
    outside = sorted(set(changed.split()) - set(c.kernel_git))
    pending = rounds.kernel_changed(c)
    ok = t.ok and not outside and not pending
    lines = [
        f"- Full test `{c.profile.full_test}`: {'PASS' if t.ok else 'FAIL'} ({t.reason})",
        f"- Files changed since {c.m.starting_commit}: "
        f"{', '.join(sorted(set(changed.split()))) or 'none'}",
        f"- Outside kernel_source: {', '.join(outside) or 'none'}",
        f"- Working tree kernel files equal the incumbent: {not pending}",
    ]
    c.log("logs/optimize.md").append(
        f"## Acceptance ({now()}) — {'PASSED' if ok else 'FAILED'}\n" + "\n".join(lines) + "\n\n"
    )
    if ok:
        c.state.phase = Phase.ACCEPTED
    c.save()
    return {"ok": ok, "details": lines, "log": os.path.relpath(log, c.root)}
