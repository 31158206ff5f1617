"""Sealed records: a closed round's files and the append-only logs cannot be edited unnoticed.

When a round is closed, the sha256 of every file in ``rounds/round-N/`` (its ``round.json``,
summary, benchmark CSVs, provenance and kernel snapshot) is written into the state's
``records``. Not sealed: ``__pycache__`` and the steps' raw output (``*.log``), which no decision
reads and which a step killed with the round (Ctrl+C, SIGTERM) may still be flushing after it
closed. Every command that reads the records (``validate``, ``status``,
``report``, the MCP tools) calls :func:`verify_records` first, so a value edited in a CSV or a
``round.json`` stops the command (LogTamperedError, exit 7) instead of changing a decision or
the REPORT's gain.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.fsutil import file_sha256, sha256_bytes
from kernel_ratchet.errors import LogTamperedError

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

APPEND_ONLY_LOGS = ("logs/optimize.md", "logs/performance_trend.md")
MANIFEST = "manifest.yaml"
ROUND_KEY, MANIFEST_KEY, CLOSED_KEY = "Round-record", "Campaign-manifest", "Closed-rounds"
_TOLERANCE = 1e-9


def _record_files(rdir: Path) -> Iterator[Path]:
    for path in sorted(rdir.rglob("*")):
        unsealed = "__pycache__" in path.parts or path.suffix in (".pyc", ".log")
        if path.is_file() and not unsealed:
            yield path


def seal_round(c: CampaignContext, n: int) -> None:
    """Record the sha256 of each of round ``n``'s files in the state (saved by the caller);
    with the BASELINE's, the manifest's (frozen then: the rounds' gates read it)."""
    for path in _record_files(c.round_dir(n)):
        c.state.records[c.rel(path)] = file_sha256(path)
    if n == 1:
        c.state.records[MANIFEST] = file_sha256(c.dir / MANIFEST)


def seal_report(c: CampaignContext) -> None:
    """Record the sha256 of ``report.md`` and of the REPORT's own files (``report/``) in the
    state (saved by the caller): ``ratchet report`` prints the written report again later."""
    for path in [c.dir / "report.md", *_record_files(c.dir / "report")]:
        if path.is_file():
            c.state.records[c.rel(path)] = file_sha256(path)


def verify_records(c: CampaignContext) -> None:
    """Raise LogTamperedError when an append-only log's written part or a sealed round file
    was changed or removed since it was written."""
    for rel in APPEND_ONLY_LOGS:
        c.log(rel).verify()
        if c.state.pending is None:
            c.log(rel).refuse_forged()
    changed = changed_records(c) + unsealed(c) + commit_mismatches(c)
    if MANIFEST in changed:
        raise LogTamperedError(
            f"{MANIFEST} was changed after BASELINE froze it (in {c.dir}): every round's "
            "gates read it (the focused test command, the thresholds, the shapes). Restore "
            "it (a git checkout or backup of the campaign directory), or start a new campaign "
            "with the changed settings"
        )
    if changed:
        raise LogTamperedError(
            f"sealed records were changed after they were written: "
            f"{', '.join(changed)} (in {c.dir}). The decisions and the REPORT read them; "
            "restore the originals (a git checkout or backup of the campaign directory) or "
            "start a new campaign"
        )
    index = index_mismatches(c)
    if index:
        raise LogTamperedError(
            f"state.json's index of closed rounds disagrees with their sealed round.json "
            f"(in {c.dir}): {'; '.join(index)}. The REPORT's gains read the index; restore "
            "state.json (a git checkout or backup of the campaign directory) or start a new "
            "campaign"
        )


def changed_records(c: CampaignContext) -> list[str]:
    """The sealed files (the manifest, closed rounds' records) whose bytes left their seal."""
    return [rel for rel, sha in sorted(c.state.records.items()) if file_sha256(c.dir / rel) != sha]


def unsealed(c: CampaignContext) -> list[str]:
    """Files that should have a seal and have none (a seal removed from the state along with
    an edit): each closed round's ``round.json`` and ``summary.md``, which the tool writes
    before it seals the round, and a log it has written. Other files of a round may appear
    after it closed (a step killed with it still flushing) and are judged by their seal only."""
    missing = [
        rel
        for e in c.state.closed
        for name in ("round.json", "summary.md")
        if (rel := c.rel(c.round_dir(e.round) / name)) not in c.state.records
    ]
    missing += [
        rel
        for rel in APPEND_ONLY_LOGS
        if (c.dir / rel).exists() and (c.dir / rel).stat().st_size and rel not in c.state.logs
    ]
    return missing


def commit_mismatches(c: CampaignContext) -> list[str]:
    """Records of accepted rounds that differ from what their commit says (the hashes of the
    round's ``round.json``, of the manifest and of the rounds closed before it, written into
    the commit message when it was made): a commit outside the campaign directory anchors the
    seals kept in ``state.json``, rolled-back rounds' included.
    A commit that cannot be read here (history rewritten, a copied campaign) is not judged."""
    from kernel_ratchet.campaign.lineage import git

    found = []
    for e in c.state.closed:
        if e.status.value != "ACCEPTED" or not e.commit:
            continue
        msg = git.log_message(c.groot, e.commit)
        for what, key, now in (
            (
                rel := c.rel(c.round_dir(e.round) / "round.json"),
                ROUND_KEY,
                file_sha256(c.dir / rel),
            ),
            (MANIFEST, MANIFEST_KEY, file_sha256(c.dir / MANIFEST)),
            (f"the rounds before round-{e.round}", CLOSED_KEY, closed_digest(c, e.round)),
        ):
            kept = _trailer(msg, key)
            if kept is not None and now != kept:
                found.append(f"{what} (against commit {e.commit[:12]})")
    return found


def _trailer(msg: str, key: str) -> str | None:
    return next(
        (
            ln.split("sha256:", 1)[1].strip()
            for ln in msg.splitlines()
            if ln.startswith(f"{key}: sha256:")
        ),
        None,
    )


def closed_digest(c: CampaignContext, below: int) -> str:
    """One sha256 over every closed round numbered below ``below``: its number, status and
    ``round.json``'s sha256. An accepted round's commit carries it, so a rolled-back round
    (or the BASELINE) edited, removed or added later disagrees with the commits after it."""
    lines = [
        f"round-{e.round} {e.status.value} {file_sha256(c.round_dir(e.round) / 'round.json')}"
        for e in sorted(c.state.closed, key=lambda e: e.round)
        if e.round < below
    ]
    return sha256_bytes("\n".join(lines).encode())


def commit_trailers(c: CampaignContext, n: int) -> str:
    """The lines an accepted round's commit message ends with: the sha256 of its round.json,
    of the manifest and of the rounds closed before it (see :func:`commit_mismatches`)."""
    record = file_sha256(c.round_dir(n) / "round.json")
    return (
        f"\n{ROUND_KEY}: sha256:{record}\n{MANIFEST_KEY}: sha256:{file_sha256(c.dir / MANIFEST)}"
        f"\n{CLOSED_KEY}: sha256:{closed_digest(c, n)}\n"
    )


def index_mismatches(c: CampaignContext) -> list[str]:
    """Where a closed round's entry in the state (status, category, gain, paired chain)
    differs from what its sealed ``round.json`` gives; the chain rebuilt through the rounds'
    incumbents, the BASELINE at 0."""
    from kernel_ratchet.campaign.record import read_record

    chains: dict[int, float | None] = {1: 0.0}
    found = []
    for e in sorted(c.state.closed, key=lambda e: e.round):
        path = c.round_dir(e.round) / "round.json"
        if e.round <= 1 or not path.exists():  # a removed file is named by the seal above
            continue
        rec = read_record(path)
        d = rec.decision
        chain = None
        if d is not None and d.paired and d.gain is not None:
            chain = (1.0 + (chains.get(rec.incumbent_round or 1) or 0.0)) * (1.0 + d.gain) - 1.0
        chains[e.round] = chain
        wrong = [
            k
            for k, a, b in (
                ("status", e.status, rec.status),
                ("category", e.category, rec.category),
            )
            if a != b
        ]
        wrong += [
            k
            for k, a, b in (
                ("gain", e.gain, rec.gain),
                ("paired_chain", e.paired_chain if e.chain_kept else chain, chain),
            )
            if not _same(a, b)
        ]
        if wrong:
            found.append(f"round-{e.round}: {', '.join(wrong)}")
    return found


def _same(a: float | None, b: float | None) -> bool:
    """Equal within the JSON round trip's tolerance; None only to None, NaN (a round rolled
    back at a gate, before any gain) only to NaN."""
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= _TOLERANCE * max(1.0, abs(b))
