"""The campaign engine: the state machine of BASELINE, VALIDATE and recovery.

Every round is driven through a write-ahead record (``state.pending``) whose stage moves
MEASURING -> DECIDED -> APPLIED -> RECORDED, each step persisted before the next starts and
each one idempotent. ``recover`` finishes a round found in flight: before its decision it is
closed as ROLLED BACK (interrupted), after it the remaining steps are completed. The lock keeps
a second process out; the kernel files are the only project files a rollback writes. The work
of each step is the round pipeline's (:mod:`kernel_ratchet.campaign.rounds`), given the
campaign's :class:`~kernel_ratchet.campaign.context.CampaignContext`.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import NoReturn

from kernel_ratchet.campaign.candidate import set_aside
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import CampaignContext, Say
from kernel_ratchet.campaign.journal import AppendOnlyLog
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.displaced import keep_displaced
from kernel_ratchet.campaign.lineage.kernel import (
    ambient,
    edited_since_start,
    put_snapshot,
    snapshot,
    snapshot_restore_command,
)
from kernel_ratchet.campaign.lineage.workspace import rounds_root
from kernel_ratchet.campaign.lock import CampaignLock
from kernel_ratchet.campaign.manifest import Manifest, load_manifest
from kernel_ratchet.campaign.record import WOULD_ACCEPT, RoundRecord, read_record, write_record
from kernel_ratchet.campaign.rounds.apply import apply
from kernel_ratchet.campaign.rounds.baseline import BaselineFailure, measure_baseline
from kernel_ratchet.campaign.rounds.close import closed_entry, write_baseline_records, write_records
from kernel_ratchet.campaign.rounds.measure import interrupted_record, measure
from kernel_ratchet.campaign.rounds.preconditions import preconditions, round_level
from kernel_ratchet.campaign.rounds.shared import refuse_in_workspace
from kernel_ratchet.campaign.state import PendingRound, Phase, Stage, State
from kernel_ratchet.campaign.steps import kill_leftovers, portable_command
from kernel_ratchet.campaign.termination import after_round
from kernel_ratchet.errors import CampaignError, SchemaError, raise_if_interrupted
from kernel_ratchet.profile.requires import ensure_runnable
from kernel_ratchet.profile.schema import OpProfile, Profile


def _fault(point: str) -> None:
    """Crash-test hook: KERNEL_RATCHET_FAULT=<point> kills this process there (kill -9)."""
    if os.environ.get("KERNEL_RATCHET_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


class Campaign:
    """One campaign directory, opened under its lock for the duration of a command
    (``with Campaign(...) as c``). ``ctx`` is what the round pipeline and the other operations
    receive; the properties below read it."""

    def __init__(self, profile: Profile, campaign_dir: Path, say: Say | None = None) -> None:
        cdir = Path(campaign_dir)
        m = load_manifest(cdir)
        profile.op(m.target_op)  # raises ProfileError when ratchet.yaml lost the campaign's op
        root = rounds_root(profile.root, cdir, m)  # workspace-mode: <campaign_dir>/src
        self.lock = CampaignLock(cdir)
        self.ctx = CampaignContext(
            profile=profile,
            dir=cdir,
            root=root,
            groot=git.toplevel(root),
            m=m,
            state=State.load(cdir),
            say=say or (lambda _msg: None),
        )

    def __enter__(self) -> Campaign:
        self.lock.acquire()
        self.ctx.state = State.load(self.dir)  # re-read under the lock
        self.ctx.m = load_manifest(self.dir)
        if self.ctx.state.rehearsal:  # its steps run in the interpreter, as it was rehearsed
            os.environ["TRITON_INTERPRET"] = "1"
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    # -- what the campaign is ------------------------------------------------------------------
    @property
    def profile(self) -> Profile:
        return self.ctx.profile

    @property
    def dir(self) -> Path:
        return self.ctx.dir

    @property
    def root(self) -> Path:
        return self.ctx.root

    @property
    def m(self) -> Manifest:
        return self.ctx.m

    @property
    def state(self) -> State:
        return self.ctx.state

    @property
    def op(self) -> OpProfile:
        return self.ctx.op

    def say(self, msg: str) -> None:
        self.ctx.say(msg)

    def save(self) -> None:
        self.ctx.save()

    def log(self, rel: str) -> AppendOnlyLog:
        return self.ctx.log(rel)

    def round_dir(self, n: int) -> Path:
        return self.ctx.round_dir(n)

    def export(self, dest: Path, *, traces: bool = False) -> list[Path]:
        """Copy the records into ``dest`` (:func:`~.export.export_records`); the files it writes
        inside the project are the tool's own, which the scope check of a round then ignores
        (an export between rounds refused the next one)."""
        from kernel_ratchet.campaign.export import export_records, is_archive

        written = export_records(self.dir, dest, traces=traces)
        top = self.ctx.groot.resolve()
        one = is_archive(dest)
        inside = [Path(dest).resolve()] if one else [Path(dest).resolve() / w for w in written]
        mine = [str(p.relative_to(top)) for p in inside if top in p.parents]
        if mine:
            self.state.exported += mine
            self.save()
        return written

    # -- BASELINE ------------------------------------------------------------------------------
    def baseline(self, known_failure: str | None = None) -> RoundRecord:
        """Round 1: focused test, harness on all target shapes, schema frozen, representative
        shapes chosen. Raises CampaignError when the unmodified kernel fails its own test
        (unless ``known_failure`` says why it does: :func:`.measure_baseline`), RatchetError
        when this machine lacks what the profile requires, CampaignError for a
        ``known_failure`` that is blank or more than one line."""
        if known_failure is not None and (not known_failure.strip() or "\n" in known_failure):
            raise CampaignError(
                "the known failure must say which failure, in one line (`ratchet baseline "
                "--known-failure WHICH`); nothing was measured"
            )
        ensure_runnable(self.profile.requires, str(self.profile.path))
        if self.state.termination:  # before its branch: that one may be gone
            raise CampaignError(
                f"campaign {self.m.campaign} has ended ({self.state.termination.reason}); "
                "start a new campaign with `ratchet init`"
            )
        self._require_branch()
        if self.state.phase is not Phase.INITIALIZED:
            raise CampaignError(
                "the baseline is taken already; edit the kernel and run "
                "`ratchet validate --hypothesis ...`"
            )
        if edited := edited_since_start(self.ctx):
            raise CampaignError(
                f"kernel files differ from the starting commit {self.m.starting_commit[:12]}: "
                f"{edited}. The baseline measures that commit's kernel, and an edit measured "
                "as the baseline would skip its own round. `git stash` the edit, run `ratchet "
                "baseline`, then `git stash pop` and propose it with `ratchet validate`; or "
                "`ratchet close --reason ...`, commit it and `ratchet init` again"
            )
        if self.state.pending:  # an interrupted baseline changed nothing: start it again
            self._set_aside(1, "interrupted-baseline")
            self.state.pending = None
        started = now()
        self.state.pending = PendingRound(1, Stage.MEASURING, started)
        self.save()
        try:
            record = measure_baseline(self.ctx, started, known_failure)
        except BaselineFailure as exc:
            self._abort_baseline(str(exc))
        write_baseline_records(self.ctx, record, self.m.representative_shapes)
        st = self.state
        st.phase, st.next_round, st.incumbent_round = Phase.OPTIMIZING, 2, 1
        st.incumbent_commit = git.head(self.ctx.groot) if self.m.git_commit else None
        st.incumbent_full_csv = st.incumbent_quick_csv = record.csv
        st.closed.append(closed_entry(self.ctx, record))
        st.ambient = ambient(self.ctx)
        st.pending = None
        self.save()
        return record

    def _abort_baseline(self, why: str) -> NoReturn:
        rdir = self.ctx.round_dir(1)
        kept = set_aside(self.ctx, 1, "failed-baseline")
        if kept is not None:  # the logs the reason names moved with the round's directory
            for was, now_at in ((rdir, kept), (self.ctx.rel(rdir), self.ctx.rel(kept))):
                why = why.replace(str(was), str(now_at))
        self._log_failed_baseline(why, kept)
        self.state.pending = None
        self.save()
        raise CampaignError(
            f"BASELINE failed: {why}. `ratchet init` fixed the kernel files (the starting "
            "commit's) and the op's entry in ratchet.yaml (test command, shapes) for this "
            "campaign: fix what lies outside them (the test file, the environment) and run "
            "`ratchet baseline` again, or end it with `ratchet close --reason TEXT`, commit the "
            "fix and run `ratchet init` again (`ratchet check` calls a described op once)."
        )

    def _log_failed_baseline(self, why: str, kept: Path | None) -> None:
        """The attempt's line in logs/optimize.md, its paths relative to the campaign."""
        if kept is not None:
            why = why.replace(str(kept), self.ctx.rel(kept))
            why += f"; its directory is kept as {self.ctx.rel(kept)}"
        said = portable_command(why, self.ctx.root)
        self.log("logs/optimize.md").append(f"> {now()}: BASELINE attempt failed: {said}.\n\n")

    def _set_aside(self, n: int, tag: str) -> None:
        set_aside(self.ctx, n, tag)

    # -- VALIDATE ------------------------------------------------------------------------------
    def validate(
        self,
        hypothesis: str,
        *,
        bucket: str = "K1",
        level: str = "quick",
        rehearse: bool = False,
        test_shared: bool = False,
        fix: bool = False,
        scope_first: bool = True,
        **notes: str,
    ) -> RoundRecord:
        """One round on the working-tree candidate, closed; its record (a failure is a ROLLED
        BACK record; a drifted CSV schema is re-raised). ``notes``: the driver's. ``rehearse``:
        rolled back whatever the timings say. ``test_shared``: other ops' tests listing a
        changed file gate it too. ``fix``: a correctness fix, accepted when not slower, or on
        correctness alone where the incumbent passes no shape. ``scope_first``: files changed
        outside kernel_source refuse it; False records a SCOPE rollback (an optimizer's round)."""
        self._require_branch()
        self.recover()
        lesson, ctx = notes.get("lesson", ""), self.ctx
        preconditions(ctx, hypothesis, bucket, level, lesson=lesson, scope=scope_first, fix=fix)
        refuse_in_workspace(ctx, test_shared)
        n = self.state.next_round
        self.state.pending = PendingRound(
            n,
            Stage.MEASURING,
            now(),
            hypothesis,
            bucket,
            round_level(ctx, level, fix),
            notes=notes,
            rehearsal=rehearse,
            test_shared=test_shared,
            fix=fix,
        )
        self.state.next_round = n + 1
        self.save()
        if self.round_dir(n).exists():
            self._set_aside(n, "orphan")
        try:
            snapshot(self.ctx, self.round_dir(n))
            _fault("measuring")
            record = measure(self.ctx, n, self.state.pending)
            raise_if_interrupted()  # a Ctrl+C whose raise was lost: no decision stands
            if rehearse or self.state.rehearsal:
                record = record.as_rehearsal()
            write_record(self.round_dir(n) / "round.json", record)
            _fault("written")  # the decision on disk, the state not yet saying so
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

    def close_measured(self, pending: PendingRound, record: RoundRecord) -> RoundRecord:
        """Close round ``pending.round``, measured away from this process (a parallel
        candidate, :mod:`~kernel_ratchet.campaign.candidate`, whose ``kernel_snapshot`` is in
        its round directory): its record written, then, under the write-ahead record, the
        snapshot committed (ACCEPTED) or the incumbent kept, and the round's records, as
        ``validate`` closes a round. Raises CampaignError for a round out of order, or an
        ACCEPTED record measured against another incumbent than the current one."""
        self._require_branch()
        self.recover()
        n, st = pending.round, self.state
        if n != st.next_round:
            raise CampaignError(f"round-{n} cannot close now: the next round is {st.next_round}")
        if record.accepted and record.incumbent_round != st.incumbent_round:
            raise CampaignError(
                f"round-{n} was measured against round-{record.incumbent_round}, not the "
                f"incumbent round-{st.incumbent_round}: it cannot be accepted"
            )
        write_record(self.round_dir(n) / "round.json", record)
        st.pending, st.next_round = pending.at(Stage.DECIDED), n + 1
        self.save()
        put_snapshot(self.ctx, self.round_dir(n))  # the tree holds what the round measured
        return self.recover()

    # -- recovery and closing ------------------------------------------------------------------
    def recover(self, interrupted: str = "a crash or kill") -> RoundRecord | None:
        """Complete or roll back the round in flight, if any. Idempotent."""
        p = self.state.pending
        if not p:
            return None
        self._require_branch()
        n = p.round
        if n == 1:
            kill_leftovers(self.round_dir(1))
            self._set_aside(1, "interrupted-baseline")
            self.state.pending = None
            self.save()
            self.say("an interrupted baseline was set aside; run `ratchet baseline` again")
            return None
        rpath = self.round_dir(n) / "round.json"
        if p.stage is Stage.MEASURING and rpath.exists():
            # written atomically as the measurement's last step: the decision stands
            p = self.state.pending = p.at(Stage.DECIDED)
            self.save()
            self.say(f"round-{n}'s decision was on disk before it was interrupted: it stands")
        if not rpath.exists():
            kill_leftovers(self.round_dir(n))
            if not (self.round_dir(n) / "kernel_snapshot" / "SNAPSHOT.json").exists():
                snapshot(self.ctx, self.round_dir(n))
            kept = self._keep_displaced(n)
            how = f"{interrupted}; {kept}" if kept else interrupted
            write_record(rpath, interrupted_record(self.ctx, n, p, how))
            p = self.state.pending = p.at(Stage.DECIDED)
            self.save()
            self.say(
                f"round-{n} was interrupted before its decision: closed as ROLLED BACK, the "
                "kernel files put back to the incumbent's. The edit it was measuring is kept "
                "in the round's snapshot; to work on it again, from the project root: "
                f"{snapshot_restore_command(self.ctx, self.round_dir(n))}"
            )
        record = read_record(rpath)
        if p.stage is Stage.DECIDED:
            self._keep_displaced(n)  # commit or roll back exactly the measured candidate
            p = self.state.pending = p.at(Stage.APPLIED, commit=apply(self.ctx, record))
            self.save()
            _fault("applied")
        if p.stage is Stage.APPLIED:
            write_records(self.ctx, n, record, p.commit)
            p = self.state.pending = p.at(Stage.RECORDED)
            self.save()
        self._close(n, record, p.commit)
        return record

    def _require_branch(self) -> None:
        """Refuse (BranchError) a command that could commit or roll back while another
        branch than the campaign's is checked out; checked before anything is changed."""
        if self.m.branch_name:
            git.require_branch(self.ctx.groot, self.m.branch_name, self.m.campaign)

    def _keep_displaced(self, n: int) -> str:
        """Keep a change to the kernel files that round ``n`` did not measure before recovery
        writes over them (:mod:`~kernel_ratchet.campaign.lineage.displaced`); says where, in
        the output and in logs/optimize.md. Returns that sentence ("" when nothing was
        displaced)."""
        kept = keep_displaced(self.ctx, n)
        if kept is None:
            return ""
        note = kept.note(self.dir)
        self.say(note)
        self.log("logs/optimize.md").append(f"> {now()}: round-{n} recovery: {note}.\n\n")
        self.save()
        return note

    def _close(self, n: int, record: RoundRecord, commit: str | None) -> None:
        st = self.state
        if st.closed_round(n) is None:
            st.closed.append(closed_entry(self.ctx, record, commit))
        if record.accepted:
            st.incumbent_round = n
            st.incumbent_commit = commit if self.m.git_commit else None
            st.incumbent_quick_csv = record.quick_csv or record.csv
            if record.level == "full":
                st.incumbent_full_csv = record.csv
            st.consecutive_rollbacks = 0
        elif (entry := st.closed_round(n)) and entry.rehearsal == WOULD_ACCEPT:
            st.consecutive_rollbacks = 0  # rolled back as a rehearsal, not for its direction
        elif record.category is Category.INTERRUPTED:
            pass  # stopped by the user, not a direction that failed
        else:
            st.consecutive_rollbacks += 1
        if record.category is not Category.SCOPE:
            st.ambient = ambient(self.ctx)
        st.pending = None
        self.save()
        after_round(self.ctx, n)
        self.save()
