"""The final report's text (SPEC section 7): current best, directions to try, the
verified-ineffective directions and those rolled back without a verdict, the full validation
against the baseline, the paired chain, chain integrity and the real-training audit (SPEC
section 8). Read from the state's closed index and the round records."""

from __future__ import annotations

import json
import math

from kernel_ratchet.campaign.category import CANDIDATE_FAILURES, Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import CampaignContext
from kernel_ratchet.campaign.headline import chain_headline
from kernel_ratchet.campaign.record import WOULD_ACCEPT, RoundRecord, read_record
from kernel_ratchet.campaign.render import num, pct
from kernel_ratchet.campaign.rounds.close import chain_of
from kernel_ratchet.campaign.rounds.correctness_only import NO_PAIR
from kernel_ratchet.campaign.rounds.paired import min_detectable
from kernel_ratchet.campaign.rounds.view import transfer_of
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.guard import RoundGain, attribute_gain
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.report.next_steps import next_steps
from kernel_ratchet.scoring.chain import check_chain
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates, score_vector
from kernel_ratchet.scoring.paired_fix import FIX


def render_report(c: CampaignContext, final: BenchTable) -> str:
    """The report's sections, ``final`` being the incumbent's full validation."""
    return _directions(c) + _final_report(c, final)


def render_closed(c: CampaignContext, reason: str) -> str:
    """The report of a campaign ended by ``ratchet close``: no full validation, so no final
    table; the accepted rounds' paired chain stands as each round measured it."""
    term = c.state.termination
    if not c.state.closed:
        return (
            f"\n## Final report ({now()})\nClosed before its BASELINE: {reason}. Nothing was "
            "measured; no round was run.\n"
        )
    acc = [r for r in c.state.closed if r.status is Status.ACCEPTED]
    return (
        _directions(c)
        + f"\n## Final report ({now()})\n"
        + _rehearsal_note(c)
        + f"Termination: {term.code if term else None} — {term.reason if term else None}\n\n"
        f"Closed without a final validation: {reason}. No full validation of the incumbent "
        "was made, so there is no final table; the numbers below are the rounds' own, and "
        "`ratchet accept` refuses this campaign.\n\n"
        f"- Headline (paired chain, the measurement that decided): {headline(c, acc)}\n"
        f"- Paired chain: {_paired_chain(c, acc)}\n" + _directions_kept(c, acc) + "\n"
        "Round summaries:\n" + _summary_links(c) + "\n\n"
    )


def _summary_links(c: CampaignContext) -> str:
    return "\n".join(
        f"- round-{r.round} ({r.label}): rounds/round-{r.round}/summary.md" for r in c.state.closed
    )


#: How a verified-ineffective round failed, where it was not on speed: a reader (or an agent)
#: must not take a wrong or unbuilt change for a slow one.
_NOT_SPEED = {
    Category.TEST: "the focused test failed: a wrong result, not a slow one",
    Category.CORRECTNESS: "the correctness check failed: a wrong result, not a slow one",
    Category.BUILD: "the build failed",
}


#: Rollbacks that judged the change itself: the anti-cheat checks, the transfer audit, a
#: backend or precision change without consent, a candidate that failed in its worker. They are
#: not ineffective directions (their speed was never the question) and not open ones either.
REFUSED = CANDIDATE_FAILURES | {Category.OVERFIT, Category.BACKEND, Category.PRECISION}


def rollbacks(
    rolled: list[ClosedEntry], accepted_later: set[int]
) -> tuple[list[ClosedEntry], list[ClosedEntry], list[ClosedEntry]]:
    """(verified-ineffective, refused, open) rollbacks; a refused or open one whose change a
    later round accepted is left out."""
    rej = [r for r in rolled if r.verified_ineffective]
    rest = [r for r in rolled if not r.verified_ineffective and r.round not in accepted_later]
    return (
        rej,
        [r for r in rest if r.category in REFUSED],
        [r for r in rest if r.category not in REFUSED],
    )


def _rounds(rounds: list[ClosedEntry]) -> str:
    return "".join(
        f"- round-{r.round}: {r.hypothesis} ({r.category.value}"
        + (f": {_NOT_SPEED[r.category]}" if r.category in _NOT_SPEED else "")
        + ")\n"
        for r in rounds
    )


def _ineffective(rounds: list[ClosedEntry]) -> str:
    """The final report's line: slow directions, then wrong or unbuilt ones apart."""
    slow = [r.hypothesis for r in rounds if r.category not in _NOT_SPEED]
    broken = [f"{r.hypothesis} ({r.category.value})" for r in rounds if r.category in _NOT_SPEED]
    line = f"- Ineffective directions: {'; '.join(slow) or 'none'}\n"
    if broken:
        line += f"- Directions that broke correctness or the build: {'; '.join(broken)}\n"
    return line


def _snapshot(c: CampaignContext, n: int) -> dict | None:
    """The kernel files' digests round ``n`` measured (its ``kernel_snapshot``), or None."""
    path = c.round_dir(n) / "kernel_snapshot" / "SNAPSHOT.json"
    try:
        return json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def accepted_later(c: CampaignContext) -> dict[int, int]:
    """Rolled-back round -> the later accepted round that measured the same kernel files:
    that change is not a direction still to try."""
    accepted = [
        (r.round, _snapshot(c, r.round)) for r in c.state.closed if r.status is Status.ACCEPTED
    ]
    out: dict[int, int] = {}
    for r in c.state.closed:
        snap = _snapshot(c, r.round) if r.status is Status.ROLLED_BACK else None
        same = [n for n, s in accepted if snap and n > r.round and s == snap]
        if same:
            out[r.round] = same[0]
    return out


def _directions(c: CampaignContext) -> str:
    """Current best, directions to try, verified-ineffective directions and the rollbacks
    without a verdict (an interrupted, scope or harness rollback says nothing about its
    direction; one whose change a later round accepted is left out)."""
    later = accepted_later(c)
    rolled = [r for r in c.state.closed if r.status is Status.ROLLED_BACK]
    rej, refused, open_ = rollbacks(rolled, set(later))
    inc = c.state.closed_round(c.state.incumbent_round or 1)
    nexts = _next_directions(c)
    commit = (inc.commit if inc else None) or c.state.incumbent_commit or "-"
    return (
        f"## Current best\nround-{c.state.incumbent_round} (commit {commit}): "
        f"{inc.hypothesis if inc else None}\n\n## Directions to try\n"
        + ("".join(f"- {d}\n" for d in nexts[:3]) or "- none recorded by the driver\n")
        + "\n## Verified-ineffective directions\n"
        + (_rounds(rej) or "- none\n")
        + (
            "\n## Refused: a cheat, a gain that does not transfer, a failing candidate (not to "
            "try again as it was)\n" + _rounds(refused)
            if refused
            else ""
        )
        + (
            "\n## Rolled back without a verdict (not ineffective: may be tried again)\n"
            + _rounds(open_)
            if open_
            else ""
        )
    )


def _paired_ratios(c: CampaignContext, acc: list[ClosedEntry]) -> dict[str, list[float]]:
    """Per shape: the accepted rounds' paired per-shape speed ratios (a quick-level round may
    not have measured every shape)."""
    ratios: dict[str, list[float]] = {}
    for r in acc:
        d = read_record(c.round_dir(r.round) / "round.json").decision
        for s in d.per_shape if d and d.paired else ():
            ratios.setdefault(s.label, []).append(1.0 + s.delta)
    return ratios


def _next_steps(c: CampaignContext, final: BenchTable, ratios: dict[str, list[float]]) -> str:
    """The report's top three next steps (:mod:`.next_steps`), joined; ``ratios``:
    :func:`_paired_ratios`."""
    later = accepted_later(c)
    steps = next_steps(
        [r for r in c.state.closed if r.round not in later],
        _next_directions(c),
        {lbl: math.prod(v) - 1 for lbl, v in ratios.items()},
        score_vector(final, c.m.campaign_type),
        c.m.primary_metric,
        min_detectable(c) > 0,
    )
    return "; ".join(steps)


def _shape_rows(
    c: CampaignContext, final: BenchTable, ratios: dict[str, list[float]], accepted: int
) -> str:
    """The full validation's rows: the harness columns and the paired chain of ``ratios``
    (:func:`_paired_ratios`, with how many of the ``accepted`` rounds measured the shape)."""
    ct = c.m.campaign_type
    base, cur = score_vector(c.baseline_table(), ct), score_vector(final, ct)
    return "\n".join(
        f"| {lbl} | {num(base.get(lbl))} | {num(cur.get(lbl))} | "
        f"{pct((cur[lbl] / base[lbl] - 1) if lbl in cur and base.get(lbl) else None, 2)} | "
        + (
            f"{pct(math.prod(ratios[lbl]) - 1, 2)} ({len(ratios[lbl])} of {accepted} rounds) |"
            if lbl in ratios
            else "- |"
        )
        for lbl in [s["label"] for s in c.m.target_shapes]
    )


def _final_report(c: CampaignContext, final: BenchTable) -> str:
    """The ``## Final report`` section: termination, full validation, gains, audit, links."""
    acc = [r for r in c.state.closed if r.status is Status.ACCEPTED]
    ratios = _paired_ratios(c, acc)
    rej = [r for r in c.state.closed if r.verified_ineffective]
    kept = [r for r in c.state.closed if r.status is not Status.ROLLED_BACK]
    chain = check_chain([(r.round, 1.0 + (r.vs_baseline or 0.0)) for r in kept])
    term = c.state.termination
    return (
        f"\n## Final report ({now()})\n"
        + _rehearsal_note(c)
        + f"Termination: {term.code if term else None} — {term.reason if term else None}\n\n"
        f"Full validation ({len(c.m.target_shapes)} shapes, {c.m.primary_metric}):\n\n"
        "| Shape | Baseline | Final | Gain (harness, diagnostic) | Paired chain |\n"
        "|---|---|---|---|---|\n" + _shape_rows(c, final, ratios, _timed(c, acc)) + "\n\n"
        "Baseline, Final and their Gain are two single harness runs taken at different times: "
        "on short steps or a busy machine they can differ by more than any change (a "
        "diagnostic). Paired chain: the product of the accepted rounds' per-shape medians of "
        "paired speed ratios (each round's summary gives its CI), the measurement that "
        "decided.\n\n"
        f"- Headline (paired chain, the measurement that decided): {headline(c, acc)}\n"
        "- Harness total (diagnostic, not the decisions' measurement): "
        f"{_harness_total(c, final)}\n"
        f"- Paired chain: {_paired_chain(c, acc)}\n"
        + _directions_kept(c, acc)
        + _ineffective(rej)
        + f"- Chain integrity (harness CSVs, diagnostic): {'; '.join(chain) or 'intact'}\n"
        f"- Top three next steps: {_next_steps(c, final, ratios)}\n"
        f"- Real-training audit: {_real_training(c)}\n\nRound summaries:\n"
        + _summary_links(c)
        + "\n\n"
    )


def _harness_total(c: CampaignContext, final: BenchTable) -> str:
    """The full validation's aggregate against the BASELINE's; none where the BASELINE
    passed no shape (declared wrong on every shape: nothing of it to compare with)."""
    ct = c.m.campaign_type
    base, f_agg = aggregates(c.baseline_table(), ct), aggregates(final, ct)
    if not base.n_pass:
        return (
            f"{num(f_agg.primary_avg) if f_agg.n_pass else 'none pass'}; no comparison with the "
            "BASELINE: it passed no shape's correctness check (taken with --known-failure), so "
            "there is none to compare with"
        )
    b_agg, f_agg = base.primary_avg, f_agg.primary_avg
    gain = f_agg / b_agg - 1.0 if b_agg > 0 else math.nan
    return (
        f"{num(b_agg)} -> {num(f_agg)} ({pct(gain, 2)}; the full validation against the "
        "BASELINE's, two single harness measurements taken at different times)"
    )


def _directions_kept(c: CampaignContext, acc: list[ClosedEntry]) -> str:
    """The accepted rounds as effective directions, and the fixes (``validate --fix``: accepted
    as not slower, no gain claimed) on a line of their own."""
    records = {r.round: read_record(c.round_dir(r.round) / "round.json") for r in acc}
    fixes = [r for r in acc if records[r.round].reason.startswith(FIX)]
    alone = [r for r in acc if _correctness_only(records[r.round])]
    gains = [r for r in acc if r not in fixes and r not in alone]
    line = f"- Effective directions: {'; '.join(r.hypothesis for r in gains) or 'none'}\n"
    if fixes:
        named = "; ".join(r.hypothesis for r in fixes)
        line += f"- Fixes (accepted as not slower, no gain claimed): {named}\n"
    if alone:
        named = "; ".join(r.hypothesis for r in alone)
        line += f"- Fixes accepted on correctness alone ({NO_PAIR}): {named}\n"
    unmeasured = [
        f"round {n}: {'; '.join(rec.unreached)}" for n, rec in records.items() if rec.unreached
    ]
    if unmeasured:
        line += (
            "- Accepted with changed kernel lines no launch of their shapes reached (their "
            f"verdicts do not speak for them): {' | '.join(unmeasured)}\n"
        )
    return line


def headline(c: CampaignContext, acc: list[ClosedEntry]) -> str:
    """The campaign's headline: the incumbent's paired chain against the BASELINE with its 95%
    CI and the time-weighted chain where every accepted round recorded one
    (:func:`~kernel_ratchet.campaign.headline.chain_headline`, which the dashboard shows too)."""
    chain = chain_of(c, c.state.incumbent_round or 1) or 0.0
    decisions = [read_record(c.round_dir(r.round) / "round.json").decision for r in acc]
    return chain_headline(chain, decisions).text()


def _rehearsal_note(c: CampaignContext) -> str:
    """What the report says of rehearsal rounds (none of them counts as a gain), or of a
    campaign measured without a GPU (its gains are the host's)."""
    n = sum(1 for r in c.state.closed if r.rehearsal)
    if not n and not c.state.rehearsal:
        if c.m.target_gpu != "cpu":
            return ""
        return (
            "CPU: this campaign ran without a GPU (Triton kernels in the Triton interpreter): "
            "every timing below is the host's wall time, and every gain is a gain on the host, "
            "not on a GPU. Measure the op on the GPU before relying on them.\n\n"
        )
    would = sum(1 for r in c.state.closed if r.rehearsal == WOULD_ACCEPT)
    return (
        f"REHEARSAL: {n} round(s) ran in the Triton interpreter, whose timings rank nothing; "
        f"{would} would have been accepted and were rolled back. No gain below comes from "
        "them; measure the op on the GPU.\n\n"
    )


def _paired_chain(c: CampaignContext, acc: list[ClosedEntry]) -> str:
    """The incumbent's paired chain (``rounds.close.chain_of``, as ``ratchet status`` and T1
    read it: the gain the decisions stand on) and the accepted rounds' paired ratios behind it,
    each against its incumbent with its CI, on the shapes each round measured."""
    parts, alone = [], []
    for r in acc:
        d = read_record(c.round_dir(r.round) / "round.json").decision
        if d is not None and d.correctness_only:
            alone.append(f"round-{r.round}")
            continue
        if d is None or not d.paired:
            return "none (an accepted round has no paired A/B)"
        lo, hi = d.gain_ci
        parts.append(
            f"round-{r.round} {1 + d.gain:.4f}x [{1 + lo:.4f}, {1 + hi:.4f}] on "
            f"{len(d.per_shape)} shapes"
        )
    if alone:
        parts.append(f"{', '.join(alone)} accepted on correctness alone, no pair timed")
    if not parts:
        return "no accepted round"
    return f"{pct(chain_of(c, c.state.incumbent_round or 1) or 0.0, 2)} ({'; '.join(parts)})"


def _real_training(c: CampaignContext) -> str:
    """S_real / W_real / R_real of the accepted chain and the inflation gap (SPEC section 8),
    against the report's headline: the incumbent's paired chain (the product of the rounds'
    gains where an accepted round has none)."""
    gains, alone = [], []
    for r in c.state.closed:
        if r.status is not Status.ACCEPTED:
            continue
        rec = read_record(c.round_dir(r.round) / "round.json")
        if _correctness_only(rec):  # no speed measured: no gain to attribute
            alone.append(f"round-{r.round}")
            continue
        t = transfer_of(rec)
        bucket = rec.transfer_static.bucket if rec.transfer_static else rec.bucket
        decision = t.get("Decision", "ACCEPT-as-real").split()[0]
        gains.append(RoundGain(r.round, bucket, decision, float(r.gain or 0.0)))
    chain = chain_of(c, c.state.incumbent_round or 1) if gains else None
    a = attribute_gain(gains, headline=chain, measured="the paired chain, the report's headline")
    if not alone:
        return a.text
    return (
        a.text
        + f"- Not counted: {', '.join(alone)}, fixes accepted on correctness alone ({NO_PAIR})\n"
    )


def _correctness_only(record: RoundRecord) -> bool:
    """Whether ``record`` is a fix accepted on correctness alone (no speed measured)."""
    return bool(record.decision and record.decision.correctness_only)


def _timed(c: CampaignContext, acc: list[ClosedEntry]) -> int:
    """How many accepted rounds timed a pair (a fix accepted on correctness alone did not)."""
    return sum(not _correctness_only(read_record(c.round_dir(r.round) / "round.json")) for r in acc)


def _next_directions(c: CampaignContext) -> list[str]:
    """The drivers' stated next directions, newest first, without repeats."""
    out: list[str] = []
    for r in reversed(c.state.closed):
        path = c.round_dir(r.round) / "round.json"
        nd = read_record(path).next_direction if path.exists() else ""
        if nd and nd not in out:
            out.append(nd)
    return out
