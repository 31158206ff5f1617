"""The campaign engine: BASELINE, VALIDATE (decide, commit or roll back, record) and recovery.

Every round is driven through a write-ahead record (``state.pending``) whose stage moves
MEASURING -> DECIDED -> APPLIED -> RECORDED, each step persisted before the next starts and
each one idempotent. ``recover`` finishes a round found in flight: before its decision it is
closed as ROLLED BACK (interrupted), after it the remaining steps are completed. The lock keeps
a second process out; the kernel files are the only project files a rollback writes.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign import closing, git, rounds, workspace
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.create import harness_command, write_harness
from kernel_ratchet.campaign.fsutil import file_sha256
from kernel_ratchet.campaign.journal import AppendOnlyLog
from kernel_ratchet.campaign.lock import CampaignLock
from kernel_ratchet.campaign.manifest import Manifest, load_manifest
from kernel_ratchet.campaign.record import Category, RoundRecord, read_record, write_record
from kernel_ratchet.campaign.records import commit_message, optimize_baseline, summary_md
from kernel_ratchet.campaign.rounds import HARNESS_TIMEOUT_S, TEST_TIMEOUT_S
from kernel_ratchet.campaign.state import PendingRound, Phase, Stage, State
from kernel_ratchet.campaign.steps import kill_leftovers, run_step
from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.harness.csv_schema import get_schema, read_csv
from kernel_ratchet.profile.schema import Profile
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.representative import choose_representative

Say = Callable[[str], None]


def _fault(point: str) -> None:
    """Crash-test hook: KERNEL_RATCHET_FAULT=<point> kills this process there (kill -9)."""
    if os.environ.get("KERNEL_RATCHET_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


class Campaign:
    """One campaign directory, opened under its lock for the duration of a command."""

    def __init__(self, profile: Profile, campaign_dir: Path, say: Say | None = None) -> None:
        self.profile = profile
        self.dir = Path(campaign_dir)
        self.say: Say = say or (lambda _msg: None)
        self.lock = CampaignLock(self.dir)
        self.m: Manifest = load_manifest(self.dir)
        self.state = State.load(self.dir)
        # workspace-mode: rounds run in <campaign_dir>/src (campaign/workspace.py)
        self.root = workspace.rounds_root(profile.root, self.dir, self.m)
        self.groot = git.toplevel(self.root)
        self.op = profile.op(self.m.target_op)

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> Campaign:
        self.lock.acquire()
        self.state = State.load(self.dir)  # re-read under the lock
        self.m = load_manifest(self.dir)
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def save(self) -> None:
        self.state.save(self.dir)

    def log(self, rel: str) -> AppendOnlyLog:
        return AppendOnlyLog(self.dir, rel, self.state.logs)

    @property
    def schema(self):
        return get_schema(self.m.csv_schema["name"])

    @property
    def kernel_git(self) -> list[str]:
        return [os.path.relpath(self.root / k, self.groot) for k in self.m.kernel_source]

    def rel(self, path: Path) -> str:
        return os.path.relpath(path, self.dir)

    def round_dir(self, n: int) -> Path:
        return self.dir / "rounds" / f"round-{n}"

    def table(self, rel: str):
        return read_csv(self.dir / rel, expected=self.frozen_schema())

    def baseline_table(self):
        """Round-1's benchmark CSV (all target shapes), read against the frozen schema."""
        return self.table("rounds/round-1/artifacts/benchmark.csv")

    def frozen_schema(self):
        sch = self.schema
        frozen = self.m.csv_schema.get("sha256")
        if frozen and frozen != sch.header_sha256:
            raise SchemaError(
                f"the campaign froze a header with sha256 {frozen}, but this kernel-ratchet's "
                f"{sch.name!r} schema hashes to {sch.header_sha256}; use the version that "
                "started the campaign"
            )
        return sch

    # -- BASELINE ------------------------------------------------------------------------------
    def baseline(self) -> RoundRecord:
        """Round 1: focused test, harness on all target shapes, schema frozen, representative
        shapes chosen. Raises CampaignError when the unmodified kernel fails its own test."""
        if self.state.phase is not Phase.INITIALIZED:
            raise CampaignError(
                "the baseline is taken already; edit the kernel and run "
                "`ratchet validate --hypothesis ...`"
            )
        if self.state.pending:  # an interrupted baseline changed nothing: start it again
            self._set_aside(1, "interrupted-baseline")
            self.state.pending = None
        self.state.pending = PendingRound(1, Stage.MEASURING, now())
        self.save()
        rdir = self.round_dir(1)
        rounds.snapshot(self, rdir)
        write_harness(self.dir, self.m, self.root, shapes=[], target_shapes=self.m.target_shapes)
        art = rdir / "artifacts"
        self.say("round-1 (BASELINE): focused test")
        test = run_step(
            "focused test",
            self.m.test_command,
            cwd=self.root,
            log_path=art / "test.log",
            timeout_s=TEST_TIMEOUT_S,
        )
        if not test.ok:
            self._abort_baseline(f"the unmodified kernel fails its focused test: {test.reason}")
        self.say(f"round-1 (BASELINE): harness on all {len(self.m.target_shapes)} target shapes")
        csv = art / "benchmark.csv"
        h = run_step(
            "harness",
            harness_command(self.dir, "full", csv),
            cwd=self.root,
            log_path=art / "harness.log",
            timeout_s=HARNESS_TIMEOUT_S,
        )
        if not h.ok or not csv.exists():
            self._abort_baseline(f"the harness did not produce a CSV: {h.reason}")
        table = read_csv(csv, expected=self.schema)
        if not any(r.passed for r in table.rows):
            self._abort_baseline(
                f"no shape passes the harness's correctness check (see {art / 'harness.log'})"
            )
        grouped = any((s.get("params") or {}).get("dist") for s in self.m.target_shapes)
        reps = choose_representative(table, self.m.campaign_type, grouped=grouped)
        sch = self.schema
        self.m = self.m.with_(
            representative_shapes=reps,
            csv_schema={"name": sch.name, "header": sch.header, "sha256": sch.header_sha256},
        )
        self.m.save(self.dir)
        self.state.harness_sha256 = write_harness(
            self.dir,
            self.m,
            self.root,
            shapes=self.m.representative_shape_dicts,
            target_shapes=self.m.target_shapes,
        )
        rounds.write_provenance(self, art, "full")
        passed = sum(r.passed for r in table.rows)
        record = RoundRecord(
            round=1,
            status=Status.BASELINE,
            category=Category.BASELINE,
            hypothesis="Baseline measurement",
            bucket="-",
            change="none (baseline)",
            level="full",
            started=self.state.pending.started,
            finished=now(),
            reason=f"baseline: {passed}/{len(table.rows)} shapes PASS; schema frozen; "
            "representative shapes chosen",
            csv=self.rel(csv),
            test_command=self.m.test_command,
            harness_command=h.command,
        )
        write_record(rdir / "round.json", record)
        view = closing.view(self, record)
        (rdir / "summary.md").write_text(summary_md(view))
        self.log("logs/optimize.md").append(optimize_baseline(view, reps))
        self.log("logs/performance_trend.md").append(closing.trend_line(self, record))
        st = self.state
        st.phase, st.next_round, st.incumbent_round = Phase.OPTIMIZING, 2, 1
        st.incumbent_commit = git.head(self.groot) if self.m.git_commit else None
        st.incumbent_full_csv = st.incumbent_quick_csv = record.csv
        st.closed.append(closing.closed_entry(self, record))
        st.ambient = rounds.ambient(self)
        st.pending = None
        self.save()
        return record

    def _abort_baseline(self, why: str) -> None:
        self._set_aside(1, "failed-baseline")
        self.state.pending = None
        self.save()
        raise CampaignError(
            f"BASELINE failed: {why}. Fix the kernel (or the test) on the "
            "starting commit, then run `ratchet baseline` again."
        )

    def _set_aside(self, n: int, tag: str) -> None:
        rdir = self.round_dir(n)
        if rdir.exists():
            stamp = now().replace(" ", "_").replace(":", "")
            dest = self.dir / "rounds" / f".{tag}-round-{n}-{stamp}"
            shutil.move(str(rdir), str(dest))

    # -- VALIDATE ------------------------------------------------------------------------------
    def validate(
        self, hypothesis: str, *, bucket: str = "K1", level: str = "quick", **notes: str
    ) -> RoundRecord:
        """One round: measure the working-tree candidate against the incumbent and close it.

        Returns the frozen round record. A failing candidate is a ROLLED BACK record, not an
        exception; a drifted CSV schema is recorded the same way and then re-raised loudly.
        """
        self.recover()
        rounds.preconditions(self, hypothesis, bucket, level)
        n = self.state.next_round
        self.state.pending = PendingRound(
            n, Stage.MEASURING, now(), hypothesis, bucket, level, notes=notes
        )
        self.state.next_round = n + 1
        self.save()
        if self.round_dir(n).exists():
            self._set_aside(n, "orphan")
        try:
            rounds.snapshot(self, self.round_dir(n))
            _fault("measuring")
            record = rounds.measure(self, n, self.state.pending)
            write_record(self.round_dir(n) / "round.json", record)
            self.state.pending = self.state.pending.at(Stage.DECIDED)
            self.save()
            _fault("decided")
        except KeyboardInterrupt as exc:  # Ctrl+C, or SIGTERM (errors.Terminated names it)
            self.say("interrupted: closing the round as rolled back")
            self.recover(interrupted=str(exc) or "Ctrl+C")
            raise
        self.recover()
        if record.category is Category.SCHEMA:
            raise SchemaError(record.reason)
        return record

    # -- recovery and closing ------------------------------------------------------------------
    def recover(self, interrupted: str = "a crash or kill") -> RoundRecord | None:
        """Complete or roll back the round in flight, if any. Idempotent."""
        p = self.state.pending
        if not p:
            return None
        n = p.round
        if n == 1:
            kill_leftovers(self.round_dir(1))
            self._set_aside(1, "interrupted-baseline")
            self.state.pending = None
            self.save()
            self.say("an interrupted baseline was set aside; run `ratchet baseline` again")
            return None
        rpath = self.round_dir(n) / "round.json"
        if p.stage is Stage.MEASURING or not rpath.exists():
            kill_leftovers(self.round_dir(n))
            if not (self.round_dir(n) / "kernel_snapshot" / "SNAPSHOT.json").exists():
                rounds.snapshot(self, self.round_dir(n))
            write_record(rpath, rounds.interrupted_record(self, n, p, interrupted))
            p = self.state.pending = p.at(Stage.DECIDED)
            self.save()
            self.say(f"round-{n} was interrupted before its decision: closed as ROLLED BACK")
        record = read_record(rpath)
        if p.stage is Stage.DECIDED:
            p = self.state.pending = p.at(Stage.APPLIED, commit=self._apply(n, record))
            self.save()
            _fault("applied")
        if p.stage is Stage.APPLIED:
            closing.write_records(self, n, record, p.commit)
            p = self.state.pending = p.at(Stage.RECORDED)
            self.save()
        self._close(n, record, p.commit)
        return record

    def _apply(self, n: int, record: RoundRecord) -> str | None:
        if record.accepted:
            if not self.m.git_commit:
                return None
            d = record.decision
            msg = commit_message(
                self.m.target_op,
                self.m.target_backend,
                n,
                record.summary or record.hypothesis,
                record.hypothesis,
                d.aggregate_before,
                d.aggregate_after,
                f"{os.path.relpath(self.dir, self.groot)}/logs/optimize.md",
            )
            head_msg = git.log_message(self.groot)
            marker = f"[optimize] {self.m.target_op} {self.m.target_backend} round-{n}:"
            if head_msg.startswith(marker):
                return git.head(self.groot)  # committed before a crash
            sha = git.commit_only(self.groot, self.kernel_git, msg)
            return sha or git.head(self.groot)
        rounds.restore_incumbent(self)
        return None

    def _close(self, n: int, record: RoundRecord, commit: str | None) -> None:
        st = self.state
        if st.closed_round(n) is None:
            st.closed.append(closing.closed_entry(self, record, commit))
        if record.accepted:
            st.incumbent_round = n
            st.incumbent_commit = commit if self.m.git_commit else None
            st.incumbent_quick_csv = record.quick_csv or record.csv
            if record.level == "full":
                st.incumbent_full_csv = record.csv
            st.consecutive_rollbacks = 0
        else:
            st.consecutive_rollbacks += 1
        if record.category is not Category.SCOPE:
            st.ambient = rounds.ambient(self)
        st.pending = None
        self.save()
        closing.after_round(self, n)
        self.save()

    # -- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        st = self.state
        return {
            "campaign": self.m.campaign,
            "directory": str(self.dir),
            "op": self.m.target_op,
            "backend": self.m.target_backend,
            "gpu": self.m.target_gpu,
            "phase": st.phase.value,
            "primary_metric": self.m.primary_metric,
            "next_round": st.next_round,
            "incumbent_round": st.incumbent_round,
            "incumbent_commit": st.incumbent_commit,
            "consecutive_rollbacks": st.consecutive_rollbacks,
            "pending": None if st.pending is None else st.pending.to_dict(),
            "termination": None if st.termination is None else st.termination.to_dict(),
            "representative_shapes": self.m.representative_shapes,
            "rounds": [
                {**r.to_dict(), "paired_chain": closing.chain_of(self, r.round)} for r in st.closed
            ],
            "harness_intact": file_sha256(self.dir / "quick_test_bench.py") == st.harness_sha256,
        }
