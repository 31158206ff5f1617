"""One candidate of a parallel round, measured away from the coordinator.

A parallel round (``ratchet run --gpus 0,1``) measures several candidates at once, each in its
own slot under ``<campaign_dir>/.fleet/slot-<i>/``: ``cand`` is a detached worktree holding the
incumbent with the candidate's change applied, ``inc`` the incumbent that the paired A/B
measures beside it. Inside ``cand`` a *view* of the campaign directory sits where the campaign
directory sits in the project: the generated harness (an identical copy, so its hash holds)
finds the candidate tree as its project root, and every other entry links to the real campaign
directory, so the round's artifacts land in ``rounds/round-N`` as for any round.

A worker runs :func:`measure_candidate` (snapshot, scope check, focused test, harness, paired
A/B, transfer check: the round pipeline of :mod:`kernel_ratchet.campaign.rounds.measure`) and
returns the record; it never writes the state, a log or git. The coordinator, the only writer
of the campaign, closes the rounds (:meth:`kernel_ratchet.campaign.engine.Campaign.
close_measured`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import CampaignContext
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import kernel_changed, snapshot
from kernel_ratchet.campaign.lineage.workspace import is_workspace
from kernel_ratchet.campaign.lineage.worktree import prepare_tree
from kernel_ratchet.campaign.manifest import load_manifest
from kernel_ratchet.campaign.record import RoundDraft, RoundRecord
from kernel_ratchet.campaign.rounds.measure import measure
from kernel_ratchet.campaign.rounds.preconditions import preconditions
from kernel_ratchet.campaign.state import PendingRound, Stage, State
from kernel_ratchet.errors import CampaignError

if TYPE_CHECKING:
    from kernel_ratchet.profile.schema import Profile

SLOTS = ".fleet"
HARNESS = "quick_test_bench.py"
#: Written into a round's directory when a worker starts measuring it: a second start of the
#: same candidate (the scheduler re-ran it after its worker died) records the loss instead.
STARTED = ".candidate-started"
#: Test hook: ``<round>`` kills the worker process that starts measuring that round (kill -9);
#: ``<round>:hang`` makes that round's task hang before it reads anything.
FAULT_ENV = "KERNEL_RATCHET_CANDIDATE_FAULT"
_NOT_LINKED = {SLOTS, ".incumbent", HARNESS}


@dataclass(frozen=True)
class CandidateJob:
    """What a worker needs to measure one candidate (plain data: it travels to the worker)."""

    profile: str  # ratchet.yaml
    campaign_dir: str
    round: int
    started: str
    hypothesis: str
    bucket: str
    level: str
    notes: Mapping[str, str] = field(default_factory=dict)
    tree: str = ""  # the candidate's project root inside its worktree
    incumbent: str = ""  # the slot's incumbent worktree
    incumbent_round: int | None = None
    fix: bool = False  # a correctness fix (``validate --fix``)

    @property
    def pending(self) -> PendingRound:
        return PendingRound(
            self.round,
            Stage.MEASURING,
            self.started,
            self.hypothesis,
            self.bucket,
            self.level,
            notes=dict(self.notes),
            fix=self.fix,
        )


def slot_dir(c: CampaignContext, i: int) -> Path:
    return c.dir / SLOTS / f"slot-{i}"


def prepare_slot(c: CampaignContext, i: int) -> Path:
    """Check out slot ``i``'s candidate tree at the incumbent (left-overs of an earlier candidate
    cleaned away) with its campaign view; returns the project root inside it. Raises
    CampaignError for a workspace-mode campaign or a campaign directory outside the project."""
    if is_workspace(c.m):
        raise CampaignError(
            "parallel candidates need a repo-mode campaign (each candidate is a git worktree); "
            "run this workspace-mode campaign on one GPU, or start one with execution_mode: repo"
        )
    rel = os.path.relpath(c.dir, c.root)
    if rel.startswith(".."):
        raise CampaignError(
            f"parallel candidates need the campaign directory inside the project ({c.dir} is "
            f"outside {c.root}): set campaign_root in ratchet.yaml to a path inside it"
        )
    wt = slot_dir(c, i) / "cand"
    if (wt / ".git").exists():
        git.git(wt, "clean", "-fdq")
    root = prepare_tree(c, wt)
    _link_view(c.dir, root / rel)
    return root


def stage_candidate(
    c: CampaignContext,
    slot: int,
    n: int,
    change: Callable[[Path], object],
    pending: PendingRound,
) -> CandidateJob | None:
    """Slot ``slot`` readied for round ``n``: the candidate tree at the incumbent with
    ``change`` (called with its project root) applied, checked as ``validate`` checks a round
    before opening it, its kernel snapshot taken into ``rounds/round-<n>`` (an earlier
    attempt's directory set aside first), and the slot's incumbent tree. None when the change
    left the kernel files equal to the incumbent's. Raises what the preconditions raise."""
    root = prepare_slot(c, slot)
    change(root)
    tree = dataclasses.replace(c, root=root, groot=git.toplevel(root))
    if not kernel_changed(tree):
        return None
    notes = pending.notes
    preconditions(
        tree,
        pending.hypothesis or "",
        pending.bucket or "K1",
        pending.level or "quick",
        lesson=notes.get("lesson", ""),
        fix=pending.fix,
    )
    set_aside(c, n, "orphan")
    snapshot(tree, c.round_dir(n))
    incumbent = slot_dir(c, slot) / "inc"
    prepare_tree(c, incumbent)
    return CandidateJob(
        profile=str(c.profile.path),
        campaign_dir=str(c.dir),
        round=n,
        started=pending.started,
        hypothesis=pending.hypothesis or "",
        bucket=pending.bucket or "K1",
        level=pending.level or "quick",
        notes=dict(notes),
        tree=str(root),
        incumbent=str(incumbent),
        incumbent_round=c.state.incumbent_round,
        fix=pending.fix,
    )


def remove_slots(c: CampaignContext) -> bool:
    """Remove the candidate slots of parallel rounds, their worktrees unregistered from git;
    True when there were any. Every candidate's kernel snapshot, artifacts and record are in
    its round directory (the slot's campaign view only links to them), so nothing is lost."""
    slots = c.dir / SLOTS
    if not slots.exists():
        return False
    shutil.rmtree(slots)  # removes the view's links, never what they point to
    git.git(c.groot, "worktree", "prune")
    return True


def set_aside(c: CampaignContext, n: int, tag: str) -> Path | None:
    """Move round ``n``'s directory (left by an attempt that never closed) out of the way,
    kept as ``rounds/.<tag>-round-<n>-<time>``; returns where (None: there was none)."""
    rdir = c.round_dir(n)
    if not rdir.exists():
        return None
    stamp = now().replace(" ", "_").replace(":", "")
    first = c.dir / "rounds" / f".{tag}-round-{n}-{stamp}"
    kept, again = first, 2
    while kept.exists():  # a second attempt within the same minute
        kept, again = first.with_name(f"{first.name}-{again}"), again + 1
    shutil.move(str(rdir), str(kept))
    return kept


def _link_view(cdir: Path, view: Path) -> None:
    """The campaign view inside a candidate tree: the harness copied, the rest linked."""
    view.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cdir / HARNESS, view / HARNESS)
    for entry in cdir.iterdir():
        link = view / entry.name
        if entry.name in _NOT_LINKED or link.is_symlink():
            continue
        if link.exists():
            shutil.rmtree(link) if link.is_dir() else link.unlink()
        link.symlink_to(entry)


def view_context(profile: Profile, job: CandidateJob) -> CampaignContext:
    """The context a worker measures ``job`` in: the campaign seen from the candidate tree."""
    cdir = Path(job.campaign_dir)
    m = load_manifest(cdir)
    root = Path(job.tree)
    return CampaignContext(
        profile=profile,
        dir=root / os.path.relpath(cdir, profile.root),
        root=root,
        groot=git.toplevel(root),
        m=m,
        state=State.load(cdir),
        say=lambda _msg: None,
        incumbent_dir=Path(job.incumbent),
    )


def measure_candidate(job: CandidateJob) -> dict[str, Any]:
    """Measure one candidate against the incumbent (a worker's task; the coordinator took
    its kernel snapshot); returns its round record as a dict. A candidate that fails is a
    record, not an exception; a candidate whose earlier start died with its worker is recorded
    as lost (INTERRUPTED)."""
    from kernel_ratchet.profile.loader import load_profile

    if os.environ.get(FAULT_ENV) == f"{job.round}:hang":
        threading.Event().wait()
    c = view_context(load_profile(job.profile), job)
    rdir = c.round_dir(job.round)
    marker = rdir / STARTED
    if marker.exists():
        where = marker.read_text().strip()
        return lost_record(job, f"its worker ({where}) died while measuring it").to_dict()
    rdir.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"pid {os.getpid()} on {_device()}\n")
    if os.environ.get(FAULT_ENV) == str(job.round):
        os.kill(os.getpid(), signal.SIGKILL)
    return measure(c, job.round, job.pending).to_dict()


def _device() -> str:
    """The GPU this worker measures on (name and visible index), or the CPU."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    pinned = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
    return f"{torch.cuda.get_device_name(0)} (CUDA_VISIBLE_DEVICES={pinned})"


def lost_record(job: CandidateJob, why: str) -> RoundRecord:
    """The ROLLED BACK record of a candidate whose worker died, hung or lost its GPU: an
    interrupted round (its direction may be tried again), never a lost one."""
    notes = {k: v for k, v in job.notes.items() if k not in ("lesson", "takeaway")}
    draft = RoundDraft(
        round=job.round,
        hypothesis=job.hypothesis,
        bucket=job.bucket,
        change=job.notes.get("change", "see kernel_snapshot"),
        level=job.level,
        started=job.started,
        test_command="",
        incumbent_round=job.incumbent_round,
        notes=notes,
        seconds=None,
    )
    reason = f"interrupted: {why}; its kernel snapshot is in its round directory"
    return draft.failed(Category.INTERRUPTED, reason, now())
