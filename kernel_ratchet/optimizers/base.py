"""The optimizer protocol: who proposes the next round's change. The tool decides.

An optimizer sees an :class:`OptimizerContext` (manifest, the incumbent's kernel sources, the
round records, the verified-ineffective ones, tips and the latest analysis) and returns one
:class:`Proposal` per round, or ``None`` when it has nothing left to try. The loop
(:mod:`kernel_ratchet.optimizers.loop`) applies the proposal and calls ``Campaign.validate``;
the engine measures, decides, commits or rolls back and records. The optimizer is then shown
the frozen :class:`~kernel_ratchet.campaign.record.RoundRecord` through
:meth:`Optimizer.observe`. An optimizer never runs the harness, parses a CSV, decides, or
touches git.

Every implementation runs :class:`kernel_ratchet.optimizers.testing.OptimizerConformance`.
"""

from __future__ import annotations

import importlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kernel_ratchet.campaign.category import CANDIDATE_FAILURES, Category
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.campaign.rounds.preconditions import one_line
from kernel_ratchet.errors import RatchetError
from kernel_ratchet.guard.static_audit import BUCKETS
from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.profile.schema import OpProfile


class OptimizerError(RatchetError):
    """An optimizer cannot run (bad options, missing agent command, protected files edited)."""


@dataclass(frozen=True)
class Proposal:
    """One round's change, stated before it is applied.

    ``files`` maps project-relative paths to their complete new text; ``apply`` (alternative)
    is called with the project root and makes the change itself. Exactly one is given.
    ``fix``: the change is a correctness fix, decided as ``ratchet validate --fix`` decides one.
    ``direction`` is a stable key of what is tried (e.g. ``"CONFIGS/bf16/large:num_stages=4"``)
    so that a verified-ineffective direction is recognised later; ``family`` groups directions
    for the stagnation rule (two rollbacks in one family -> another family).
    Raises ValueError when a field is malformed.
    """

    hypothesis: str
    bucket: str
    expected: str
    summary: str
    direction: str
    family: str = ""
    files: Mapping[str, str] | None = None
    apply: Callable[[Path], None] | None = None
    level: str = "quick"
    next_direction: str = ""
    notes: Mapping[str, Any] = field(default_factory=dict)
    fix: bool = False  # a correctness fix (``validate --fix``)

    def __post_init__(self) -> None:
        if not self.hypothesis.strip():
            raise ValueError("a proposal states its hypothesis before the change")
        try:  # the rule `ratchet validate --hypothesis` applies: one line, no control characters
            one_line("hypothesis", self.hypothesis)
        except RatchetError as exc:
            raise ValueError(str(exc)) from None
        if self.bucket not in BUCKETS:
            raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}, not {self.bucket!r}")
        if (self.files is None) == (self.apply is None):
            raise ValueError("give exactly one of files= (path -> new text) or apply=")
        if "\n" in self.summary or not self.summary.strip():
            raise ValueError("summary is one non-empty line")
        if not self.direction.strip():
            raise ValueError("a proposal names its direction (a stable key)")
        if self.level not in ("quick", "full"):
            raise ValueError(f"level must be quick or full, not {self.level!r}")
        if not isinstance(self.fix, bool):
            raise ValueError(f"fix must be true or false, not {self.fix!r}")
        if self.files is not None:
            object.__setattr__(self, "files", MappingProxyType(dict(self.files)))
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))
        object.__setattr__(self, "family", self.family or self.direction.split(":")[0])

    def apply_to(self, root: Path) -> list[str]:
        """Make the change in the project at ``root``; returns the paths written (``files``)."""
        if self.apply is not None:
            self.apply(Path(root))
            return []
        written = []
        for rel, text in (self.files or {}).items():
            path = Path(root) / rel
            if not path.exists() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                written.append(rel)
        return written


@dataclass(frozen=True)
class OptimizerContext:
    """What an optimizer may read before proposing round ``round_no``.

    ``sources`` are the incumbent's kernel files (relative path -> text); ``rounds`` the round
    records (oldest first); ``ineffective`` those whose rollback proves their direction
    ineffective (:func:`kernel_ratchet.campaign.record.verified_ineffective`); ``analysis`` the
    latest ``analysis.json`` (or None).
    """

    root: Path
    manifest: Mapping[str, Any]
    sources: Mapping[str, str]
    rounds: Sequence[RoundRecord] = ()
    ineffective: Sequence[RoundRecord] = ()
    tips: str = ""
    analysis: Mapping[str, Any] | None = None
    tunables: str | None = None
    campaign_dir: Path | None = None
    round_no: int = 2
    protected: Sequence[str] = ()
    knobs: Sequence[KnobDecl] = ()  # ops.<op>.knobs of ratchet.yaml

    @property
    def kernel_source(self) -> tuple[str, ...]:
        return tuple(self.manifest.get("kernel_source") or ())

    @property
    def op(self) -> str:
        return str(self.manifest.get("target_op", ""))

    def is_ineffective(self, direction: str) -> bool:
        return any(r.direction_key == direction for r in self.ineffective)

    def tried(self) -> set[str]:
        """Directions of every decided round (accepted or verified-ineffective), and of every
        rehearsed one: a rehearsal's timings decide nothing, and the same move rehearsed
        again would exercise nothing new."""
        return {
            r.direction
            for r in self.rounds
            if r.direction
            and (r.accepted or r.verified_ineffective or r.category == Category.REHEARSAL)
        }

    def launched(self) -> set[str] | None:
        """The Triton kernels the op launched on the campaign's shapes: those the BASELINE's
        and every accepted round's harness recorded (:mod:`kernel_ratchet.harness.launches`),
        or None when none was recorded."""
        if self.campaign_dir is None:
            return None
        from kernel_ratchet.harness import launches

        rounds = {1} | {r.round for r in self.rounds if r.accepted}
        found: set[str] = set()
        for n in sorted(rounds):
            path = self.campaign_dir / "rounds" / f"round-{n}" / "artifacts" / launches.FILE
            found |= launches.read(path) or set()
        return found or None

    def failed(self) -> set[str]:
        """Directions whose candidate failed in its own worker (crash, hang, compile, wrong
        output, ...): the same change would fail again."""
        return {
            r.direction for r in self.rounds if r.direction and r.category in CANDIDATE_FAILURES
        }


class Optimizer(ABC):
    """Base of every optimizer.

    Contract: ``propose`` returns a :class:`Proposal` whose change touches only
    ``context.kernel_source`` files and whose direction is not verified-ineffective, or None
    when nothing is left to try. It must not run the harness, decide, or call git.
    ``observe`` is called with every closed round record (any status or category, including
    interrupted and scope rollbacks) and must never raise for a well-formed record.
    """

    name: str = "optimizer"
    #: True for an optimizer whose None means "a person takes over" (the loop then stops
    #: without ending the campaign) rather than "nothing left to try" (T4 and the REPORT).
    interactive: bool = False
    #: Whether ``propose`` reads the incumbent's kernel time breakdown (``analysis["profile"]``,
    #: a profiler run and Nsight Compute after every new incumbent); False skips taking it.
    reads_profile: bool = True

    @abstractmethod
    def propose(self, context: OptimizerContext) -> Proposal | None:
        """The next round's change, or None when nothing is left to try."""

    def propose_batch(self, context: OptimizerContext, k: int) -> list[Proposal]:
        """Up to ``k`` proposals of different directions for one parallel round, each one
        change to the same incumbent; empty when nothing is left. Default: the one of
        :meth:`propose` (an optimizer that can state several hypotheses at once overrides
        it)."""
        proposal = self.propose(context)
        return [] if proposal is None else [proposal]

    def observe(self, record: RoundRecord) -> None:  # noqa: B027 - optional hook
        """See a closed round's frozen record (default: ignore it)."""

    def check_ready(self, root: Path, op: OpProfile) -> None:  # noqa: B027 - optional hook
        """Raise OptimizerError when this optimizer cannot drive ``op`` of the project at
        ``root`` (checked before a campaign starts or resumes; default: it can)."""

    def done_note(self) -> str:
        """What the run's end adds when this optimizer has nothing left to try, from "; " on:
        e.g. the candidates it skipped and why (default: nothing)."""
        return ""

    def settings(self) -> dict[str, Any]:
        """What ``ratchet resume`` needs to drive the campaign the same way (recorded in the
        campaign; no secrets: an agent's command is given again)."""
        return {"name": self.name}


#: name -> "module:attr", imported on first use (an optional dependency stays optional).
OPTIMIZERS: dict[str, str] = {
    "search": "kernel_ratchet.optimizers.search:SearchOptimizer",
    "agent": "kernel_ratchet.optimizers.agent:AgentOptimizer",
    "manual": "kernel_ratchet.optimizers.manual:ManualOptimizer",
    "queue": "kernel_ratchet.optimizers.queue:QueueOptimizer",
}


def load_optimizer(name: str, **options: Any) -> Optimizer:
    """Instantiate a registered optimizer. Raises OptimizerError for an unknown name or an
    unknown option key (the message lists the allowed ones)."""
    if name not in OPTIMIZERS:
        raise OptimizerError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    module, attr = OPTIMIZERS[name].split(":")
    cls = getattr(importlib.import_module(module), attr)
    allowed = [p for p in inspect.signature(cls).parameters if p not in ("self",)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise OptimizerError(f"optimizer {name!r} does not take {unknown}; allowed: {allowed}")
    return cls(**options)
