"""Where a campaign stands, as one JSON-able dict: what ``ratchet status`` prints and the MCP
tool ``campaign_status`` returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel_ratchet.campaign.context import CampaignContext
from kernel_ratchet.campaign.fsutil import file_sha256
from kernel_ratchet.campaign.record import read_record
from kernel_ratchet.campaign.rounds.close import chain_of
from kernel_ratchet.campaign.seal import verify_records
from kernel_ratchet.scoring.decision import Status


def campaign_status(c: CampaignContext, *, verify: bool = True) -> dict[str, Any]:
    """Phase, incumbent, round in flight, termination and every closed round with its paired
    chain (rebuilt from the record for an entry closed before the chain was kept), the round
    that chain counts from (``chain_from``: the BASELINE, or the last fix accepted on
    correctness alone before it, past which no pair reaches back) and where its
    wall time went (``seconds``: step -> s, from its record; None when not recorded). Raises
    LogTamperedError when a log or a closed round's record was edited (``verify`` False: not
    checked, for a look while another process writes them)."""
    if verify:
        verify_records(c)
    st = c.state
    return {
        "campaign": c.m.campaign,
        "directory": str(c.dir),
        "op": c.m.target_op,
        "backend": c.m.target_backend,
        "gpu": c.m.target_gpu,
        "phase": st.phase.value,
        "rehearsal": st.rehearsal,
        "primary_metric": c.m.primary_metric,
        "next_round": st.next_round,
        "incumbent_round": st.incumbent_round,
        "incumbent_commit": st.incumbent_commit,
        "consecutive_rollbacks": st.consecutive_rollbacks,
        "pending": None if st.pending is None else st.pending.to_dict(),
        "termination": None if st.termination is None else st.termination.to_dict(),
        "representative_shapes": c.m.representative_shapes,
        "rounds": _rounds(c),
        "harness_intact": file_sha256(c.dir / "quick_test_bench.py") == st.harness_sha256,
    }


def _rounds(c: CampaignContext) -> list[dict[str, Any]]:
    rows, origin = [], 1
    for r in c.state.closed:
        chain = chain_of(c, r.round)
        row = {**r.to_dict(), "paired_chain": chain, "chain_from": origin}
        rows.append({**row, "seconds": _seconds(c, r.round)})
        if r.status is Status.ACCEPTED and _fix_alone(c, r.round):
            origin = r.round  # later rounds are paired against it, and count from it
    return rows


def _fix_alone(c: CampaignContext, n: int) -> bool:
    """Whether closed round ``n`` is a fix accepted on correctness alone (from its record)."""
    path = c.round_dir(n) / "round.json"
    return path.exists() and read_record(path).fix_alone


def round_now(status: Mapping[str, Any]) -> str:
    """Which round the campaign is at, for a person: the round in flight (its stage) while
    one is, since ``next_round`` is already counted past it then; else the next round."""
    pending = status.get("pending")
    if pending:
        return f"round {pending['round']} in flight ({pending['stage']})"
    return f"next round {status['next_round']}"


def _seconds(c: CampaignContext, n: int) -> dict[str, float] | None:
    path = c.round_dir(n) / "round.json"
    return read_record(path).seconds if path.exists() else None
