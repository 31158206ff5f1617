"""The MCP tools as plain functions over the same API the CLI uses; no ``mcp`` import here.

Each method of :class:`RatchetTools` is one tool: JSON-able arguments in, a JSON-able dict out
(NaN and infinities become null). Infrastructure faults raise :class:`RatchetError` (the server
turns them into tool errors carrying the message); a failing candidate is a result, as in the
CLI. Campaign tools open the campaign under its lock for the duration of the call, like a CLI
command, so a tool call and a ``ratchet`` command never drive one campaign at once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernel_ratchet.errors import CampaignError, RatchetError

log = logging.getLogger("kernel_ratchet.mcp")

#: The tool names, in the order the server lists them.
TOOL_NAMES: tuple[str, ...] = (
    "parse_bench_csv",
    "campaign_status",
    "query_trend",
    "list_ineffective_directions",
    "read_best_summary",
    "query_tips",
    "append_tip",
    "baseline",
    "run_quick_validation",
    "validate_round",
    "report",
)


def jsonable(x: Any) -> Any:
    """``x`` with NaN/inf floats replaced by None and tuples by lists (strict JSON)."""
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def parse_trend(text: str) -> list[dict[str, str]]:
    """The rows of ``logs/performance_trend.md`` as dicts keyed by the header's columns
    (corrections appended later are rows too, in file order)."""
    header: list[str] | None = None
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "Round":
            header = cells
        elif header and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


class RatchetTools:
    """The tool implementations, bound to one handoff profile (None: found from the cwd)."""

    def __init__(self, profile_path: Path | None = None) -> None:
        self.profile_path = profile_path

    # -- plumbing ------------------------------------------------------------------------------
    def _profile(self):
        from kernel_ratchet.profile.loader import find_profile, load_profile

        return load_profile(self.profile_path or find_profile(Path.cwd()))

    @contextmanager
    def _campaign(self, name: str | None) -> Iterator[Any]:
        from kernel_ratchet.campaign.engine import Campaign
        from kernel_ratchet.campaign.locate import find_campaign
        from kernel_ratchet.campaign.seal import verify_records

        prof = self._profile()
        with Campaign(prof, find_campaign(prof, name or None), say=log.info) as c:
            verify_records(c.ctx)  # every tool reads the logs or the round records
            yield c

    # -- tools ---------------------------------------------------------------------------------
    def parse_bench_csv(self, path: str) -> dict:
        """Parse a benchmark CSV with kernel-ratchet's one reader (schema detected and checked).
        Returns {schema, header, rows}; a relative path is taken from the server's cwd."""
        from kernel_ratchet.harness.csv_schema import read_csv

        t = read_csv(Path(path))
        return jsonable(
            {"schema": t.schema.name, "header": t.schema.header, "rows": t.to_records()}
        )

    def campaign_status(self, campaign: str | None = None) -> dict:
        """Where the campaign stands: phase, rounds, incumbent, termination (an interrupted
        round is closed first, as `ratchet status` does)."""
        from kernel_ratchet.campaign.status import campaign_status

        with self._campaign(campaign) as c:
            c.recover()
            return jsonable(campaign_status(c.ctx))

    def query_trend(self, campaign: str | None = None, last: int | None = None) -> dict:
        """The performance trend table (logs/performance_trend.md) as rows; `last` keeps the
        newest N rows."""
        with self._campaign(campaign) as c:
            text = (c.dir / "logs" / "performance_trend.md").read_text(encoding="utf-8")
        rows = parse_trend(text)
        return {"campaign": c.m.campaign, "rows": rows[-last:] if last else rows}

    def list_ineffective_directions(self, campaign: str | None = None) -> dict:
        """The verified-ineffective directions (the REPORT's: rollbacks whose category proves
        the direction ineffective) with their root cause, reason, lesson and the tests a
        failed focused test reported: what not to try again. Interrupted, scope and harness
        rollbacks are not among them."""
        from kernel_ratchet.campaign.record import read_record

        out = []
        with self._campaign(campaign) as c:
            for r in c.state.closed:
                if not r.verified_ineffective:
                    continue
                path = c.round_dir(r.round) / "round.json"
                rec = read_record(path) if path.exists() else None
                out.append(
                    {
                        "round": r.round,
                        "hypothesis": r.hypothesis,
                        "bucket": rec.bucket if rec else None,
                        "category": r.category.value,
                        "root_cause": r.category.root_cause,
                        "reason": rec.reason if rec else "",
                        "lesson": rec.lesson if rec else "",
                        "failed_tests": list(rec.failed_tests) if rec else [],
                        "summary": f"rounds/round-{r.round}/summary.md",
                    }
                )
            name = c.m.campaign
        return jsonable({"campaign": name, "directions": out})

    def read_best_summary(self, campaign: str | None = None) -> dict:
        """The incumbent round's summary.md and frozen record (round-1 before any accept)."""
        from kernel_ratchet.campaign.record import read_record

        with self._campaign(campaign) as c:
            n = c.state.incumbent_round
            if not n:
                raise CampaignError("no baseline yet: run `ratchet baseline` first")
            rdir = c.round_dir(n)
            return jsonable(
                {
                    "campaign": c.m.campaign,
                    "round": n,
                    "commit": c.state.incumbent_commit,
                    "summary": (rdir / "summary.md").read_text(encoding="utf-8"),
                    "record": read_record(rdir / "round.json").to_dict(),
                }
            )

    def _tips_file(self, op: str | None, gpu: str | None, campaign: str | None) -> Path:
        from kernel_ratchet.campaign.create import detect_gpu
        from kernel_ratchet.campaign.tips import tips_path

        prof = self._profile()
        if op is None:
            with self._campaign(campaign) as c:
                op, gpu = c.m.target_op, gpu or c.m.target_gpu
        return tips_path(prof.tips_root_path, gpu or detect_gpu(), op, prof.op(op).backend)

    def query_tips(
        self, op: str | None = None, gpu: str | None = None, campaign: str | None = None
    ) -> dict:
        """Historical tips for an op, backend and GPU (default: the campaign's op and GPU)."""
        from kernel_ratchet.campaign.tips import read_tips

        path = self._tips_file(op, gpu, campaign)
        return {"path": str(path), "tips": read_tips(path)}

    def append_tip(
        self,
        round: int,
        status: str,
        context: str,
        signal: str,
        takeaway: str,
        applicability: str,
        op: str | None = None,
        gpu: str | None = None,
        campaign: str | None = None,
    ) -> dict:
        """Append one tip (SPEC section 7 format); status is ACCEPTED or 'ROLLED BACK'."""
        from kernel_ratchet.campaign.tips import add_tip

        if status not in ("ACCEPTED", "ROLLED BACK"):
            raise RatchetError("status must be ACCEPTED or 'ROLLED BACK'")
        path = self._tips_file(op, gpu, campaign)
        entry = add_tip(path, round, status, context, signal, takeaway, applicability)
        return {"path": str(path), "entry": entry}

    def baseline(self, known_failure: str | None = None, campaign: str | None = None) -> dict:
        """BASELINE (round-1) of a campaign started with `ratchet init`, exactly as `ratchet
        baseline`: the focused test and the harness on every target shape; the CSV schema and
        the representative shapes are frozen. ``known_failure``: as ``--known-failure``, one
        line saying which bug of the unmodified kernel a `validate_round(fix=True)` round is
        to fix (its focused test fails, or the harness's check fails on every shape); the
        baseline records it, and with no shape passing only fix rounds may follow. Returns the
        frozen round record and the representative shapes."""
        from kernel_ratchet.campaign.driver import MANUAL, record_driver
        from kernel_ratchet.dashboard.site import after_round

        with self._campaign(campaign) as c:
            record_driver(c.dir, {"name": MANUAL})  # as `ratchet baseline`
            rec = c.baseline(known_failure)
            after_round(c)
            reps = list(c.m.representative_shapes)
            return jsonable({"record": rec.to_dict(), "representative_shapes": reps})

    def run_quick_validation(self, level: str = "quick", campaign: str | None = None) -> dict:
        """Dry run: the campaign's harness on the current kernel files at `level` (quick:
        representative shapes), without a round; returns the rows, an unpaired preview
        against the incumbent's CSV (a diagnostic: only a round's paired A/B decides) and the
        changed kernel lines no launch of those shapes reached (`unreached`)."""
        from kernel_ratchet.campaign.dryrun import quick_validation

        with self._campaign(campaign) as c:
            return jsonable(quick_validation(c.ctx, level))

    def validate_round(
        self,
        hypothesis: str,
        bucket: str = "K1",
        level: str = "quick",
        change: str = "",
        expected: str = "",
        lesson: str = "",
        next_direction: str = "",
        takeaway: str = "",
        test_shared: bool = False,
        fix: bool = False,
        patch: str | None = None,
        campaign: str | None = None,
    ) -> dict:
        """One round on the working-tree change, exactly as `ratchet validate`: decided,
        committed or rolled back, recorded. ``test_shared``: as ``--test-shared``, the focused
        tests of the other ops listing a changed kernel file gate it too. ``fix``: as
        ``--fix``, a correctness fix accepted when not slower (on correctness alone where the
        incumbent passes no shape). ``patch``: as ``--patch``, the path of a unified diff of
        kernel files applied as the round's change. Returns the frozen round record."""
        from kernel_ratchet.campaign.candidate_patch import validate_patch
        from kernel_ratchet.campaign.driver import MANUAL, record_driver
        from kernel_ratchet.dashboard.site import after_round

        with self._campaign(campaign) as c:
            record_driver(c.dir, {"name": MANUAL})  # as `ratchet validate`: resume will not drive
            rec = validate_patch(
                c,
                hypothesis,
                None if patch is None else Path(patch),
                bucket=bucket,
                level=level,
                change=change,
                expected=expected,
                lesson=lesson,
                next_direction=next_direction,
                takeaway=takeaway,
                test_shared=test_shared,
                fix=fix,
            )
            after_round(c)
            term = c.state.termination
            return jsonable(
                {
                    "record": rec.to_dict(),
                    "termination": None if term is None else term.to_dict(),
                    "consecutive_rollbacks": c.state.consecutive_rollbacks,
                }
            )

    def report(self, campaign: str | None = None) -> dict:
        """REPORT: full validation of the incumbent and the final report (ends the campaign)."""
        from kernel_ratchet.report.final import report as do_report

        with self._campaign(campaign) as c:
            done = do_report(c)
            return {"path": str(c.dir / "report.md"), "report": done.text, "branch": done.branch}
