"""The campaign's history as frozen records (SPEC section 7): what a closed round was.

A :class:`RoundRecord` is ``rounds/round-N/round.json``; it is written once, when the round's
decision is final, and read back by everything that looks at the history (the next round, the
REPORT, ``ratchet status``, the MCP tools, the optimizers). Its :class:`Category` says why a
round ended as it did; it is set where that happens (the scope check, the focused test, the
gates, the paired A/B, ...) and never read back from the reason text. Records validate on
construction; ``to_dict``/``from_dict`` write and read the JSON format on disk (older files
missing a later key read with its default). :func:`read_record` and :func:`write_record` are
the only way a round record reaches or leaves the disk.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.category import Category, check_outcome, is_verified_ineffective
from kernel_ratchet.campaign.fsutil import atomic_write_json
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.guard.static_audit import BUCKETS, StaticAudit
from kernel_ratchet.scoring.decision import Status

LEVELS = ("quick", "full")
#: The label of a rehearsal round whose timings said accept (rolled back all the same).
WOULD_ACCEPT = "REHEARSAL: would accept"
#: The driver's notes on a round besides its hypothesis, bucket and level.
NOTE_KEYS = ("change", "expected", "lesson", "next_direction", "takeaway", "summary", "direction")
#: The key of a round's ``seconds`` that holds how many of its steps' seconds ran at the same
#: time as other steps (a focused test without the GPU runs beside the harness and the A/B).
OVERLAP_STEP = "overlap"


@dataclass(frozen=True)
class RoundRecord:
    """One closed round, as ``round.json`` holds it.

    ``round`` 1 is the BASELINE. ``csv`` is the round's benchmark CSV (relative to the campaign
    directory), ``quick_csv`` the quick-level one of an escalated round, ``incumbent_csv`` what
    it was compared with; ``decision`` is None when no decision was measured (a failure before
    it). ``seconds``: wall time per step that ran (``measure`` = the whole round; ``overlap``:
    the steps' seconds that ran beside other steps). Raises ValueError
    on an unknown status, category or level, or a category that contradicts the status.
    """

    round: int
    status: Status
    category: Category
    hypothesis: str = ""
    bucket: str = "-"
    change: str = ""
    level: str = "quick"
    started: str = ""
    finished: str = ""
    reason: str = ""
    csv: str | None = None
    quick_csv: str | None = None
    incumbent_csv: str | None = None
    decision: RoundDecision | None = None
    test_command: str = ""
    harness_command: str = ""
    # what the driver stated with the round (absent from the BASELINE's record)
    expected: str = ""
    lesson: str = ""
    next_direction: str = ""
    takeaway: str = ""
    summary: str = ""
    direction: str = ""
    incumbent_round: int | None = None
    out_of_scope: tuple[str, ...] = ()
    ignored_editor_files: tuple[str, ...] = ()  # changed, not counted by the scope check
    # other ops listing a changed kernel file -> those files; whether their tests gated it
    shared_with: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    shared_tested: bool = False
    # changed lines of JIT functions no recorded launch of the round's harness reached
    unreached: tuple[str, ...] = ()
    # every test a failed focused test (or a BASELINE's declared failure) reported, by node id
    failed_tests: tuple[str, ...] = ()
    # present only where the round got that far
    seconds: Mapping[str, float] | None = None
    transfer_static: StaticAudit | None = None
    escalated: bool = False
    failure: Mapping[str, Any] | None = None
    rehearsal: bool = False  # a rehearsal's round: see :meth:`as_rehearsal`

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "category", Category(self.category))
        object.__setattr__(self, "out_of_scope", tuple(self.out_of_scope))
        object.__setattr__(self, "ignored_editor_files", tuple(self.ignored_editor_files))
        object.__setattr__(self, "unreached", tuple(self.unreached))
        object.__setattr__(self, "failed_tests", tuple(self.failed_tests))
        if self.seconds is not None:
            object.__setattr__(self, "seconds", dict(self.seconds))
        if not isinstance(self.round, int) or self.round < 1:
            raise ValueError(f"round must be a number from 1, not {self.round!r}")
        if self.level not in LEVELS:
            raise ValueError(f"level must be quick or full, not {self.level!r}")
        if self.bucket not in (*BUCKETS, "-"):
            raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}, not {self.bucket!r}")
        check_outcome(self.status, self.category)

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    @property
    def verified_ineffective(self) -> bool:
        return is_verified_ineffective(self.status, self.category)

    @property
    def fix_alone(self) -> bool:
        """A fix accepted on correctness alone (its incumbent passed no shape): no pair was
        timed, no gain is claimed, and later rounds' paired chains count from it."""
        return self.accepted and bool(self.decision and self.decision.correctness_only)

    @property
    def label(self) -> str:
        """The status as shown: a rehearsal's says REHEARSAL and what its timings said."""
        if not self.rehearsal:
            return self.status.value
        if self.category is Category.REHEARSAL and self.decision is not None:
            would = self.decision.rehearsed is Status.ACCEPTED
            return WOULD_ACCEPT if would else "REHEARSAL: would roll back"
        return f"REHEARSAL: {self.status.value}"

    def as_rehearsal(self) -> RoundRecord:
        """This round taken in a rehearsal (the Triton interpreter): a verdict of its timings
        (accept, noise, no gain, regression, ...) is rolled back as category REHEARSAL, so
        nothing a rehearsal measured is ever committed or counted as a gain; a verdict that
        does not stand on timings (a failed test, a wrong output, a scope breach) is kept.
        Either way the reason starts with REHEARSAL."""
        d = self.decision
        if d is None or self.category not in _TIMED:
            return replace(self, rehearsal=True, reason=f"REHEARSAL: {self.reason}")
        d = d.as_rehearsal()
        return replace(
            self,
            rehearsal=True,
            status=d.status,
            category=Category.REHEARSAL,
            reason=d.reason,
            decision=d,
        )

    @property
    def direction_key(self) -> str:
        """What was tried: the direction the driver named, else the hypothesis."""
        return self.direction or self.hypothesis

    @property
    def gain(self) -> float | None:
        """The decision's gain against the incumbent (None without a decision)."""
        return None if self.decision is None else self.decision.gain

    def with_seconds(self, step: str, seconds: float) -> RoundRecord:
        return replace(self, seconds={**(self.seconds or {}), step: round(seconds, 1)})

    def to_dict(self) -> dict[str, Any]:
        """The ``round.json`` dict (the BASELINE's has no driver fields)."""
        d: dict[str, Any] = {
            "round": self.round,
            "status": self.status.value,
            "category": self.category.value,
            **{k: getattr(self, k) for k in _COMMON},
            "decision": None if self.decision is None else self.decision.to_dict(),
        }
        if self.status is not Status.BASELINE:
            d.update({k: getattr(self, k) for k in _DRIVER})
            d["out_of_scope"] = list(self.out_of_scope)
        if self.ignored_editor_files:
            d["ignored_editor_files"] = list(self.ignored_editor_files)
        if self.shared_with:
            d["shared_with"] = {op: list(files) for op, files in self.shared_with.items()}
            d["shared_tested"] = self.shared_tested
        if self.unreached:
            d["unreached"] = list(self.unreached)
        if self.failed_tests:
            d["failed_tests"] = list(self.failed_tests)
        if self.seconds is not None:
            d["seconds"] = dict(self.seconds)
        if self.transfer_static is not None:
            d["transfer_static"] = asdict(self.transfer_static)
        if self.escalated:
            d["escalated"] = True
        if self.failure is not None:
            d["failure"] = dict(self.failure)
        if self.rehearsal:
            d["rehearsal"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundRecord:
        """Read a ``round.json`` dict; keys a record does not have take their defaults."""
        known = {
            k: d[k]
            for k in (*_COMMON, *_DRIVER, "seconds", "escalated", "rehearsal", "shared_tested")
            if k in d
        }
        static = d.get("transfer_static")
        return cls(
            round=d["round"],
            status=Status(d["status"]),
            category=Category(d["category"]),
            decision=RoundDecision.from_dict(d["decision"]) if d.get("decision") else None,
            out_of_scope=tuple(d.get("out_of_scope") or ()),
            ignored_editor_files=tuple(d.get("ignored_editor_files") or ()),
            unreached=tuple(d.get("unreached") or ()),
            failed_tests=tuple(d.get("failed_tests") or ()),
            shared_with={op: tuple(f) for op, f in (d.get("shared_with") or {}).items()},
            transfer_static=None if static is None else _static_audit(static),
            failure=d.get("failure"),
            **known,
        )


#: The categories of a verdict that stands on timings (what a rehearsal cannot give).
_TIMED = frozenset(
    {
        Category.OK,
        Category.NOISE,
        Category.NO_GAIN,
        Category.REGRESSION,
        Category.UNCONFIRMED,
        Category.OVERFIT,
    }
)

_COMMON = (
    "hypothesis",
    "bucket",
    "change",
    "level",
    "started",
    "finished",
    "reason",
    "csv",
    "quick_csv",
    "incumbent_csv",
    "test_command",
    "harness_command",
)
_DRIVER = (
    "expected",
    "lesson",
    "next_direction",
    "takeaway",
    "summary",
    "direction",
    "incumbent_round",
)


def _static_audit(d: Mapping[str, Any]) -> StaticAudit:
    return StaticAudit(
        bucket=d["bucket"],
        evidence=tuple(d.get("evidence") or ()),
        cache_keys=tuple(d.get("cache_keys") or ()),
        verdict=d["verdict"],
        reason=d["reason"],
    )


@dataclass
class RoundDraft:
    """A round while it measures: what is known before its outcome, filled in step by step.

    :meth:`failed` is the one place where a failing candidate (or an interrupted round)
    becomes a record; :meth:`decided` turns a measured decision into one.
    """

    round: int
    hypothesis: str
    bucket: str
    change: str
    level: str
    started: str
    test_command: str
    incumbent_round: int | None
    notes: Mapping[str, str] = field(default_factory=dict)
    harness_command: str = ""
    quick_csv: str | None = None
    seconds: dict[str, float] | None = field(default_factory=dict)
    transfer_static: StaticAudit | None = None
    ignored: list[str] = field(default_factory=list)  # editor files the scope check ignored
    shared_with: dict[str, list[str]] = field(default_factory=dict)
    shared_tested: bool = False

    def timed(self, step: str, seconds: float) -> None:
        """Record that ``step`` took ``seconds`` (monotonic clock)."""
        if self.seconds is not None:
            self.seconds[step] = round(seconds, 1)

    def _record(self, **outcome: Any) -> RoundRecord:
        n = dict(self.notes)
        if Status(outcome["status"]) is Status.ACCEPTED:
            n.pop("lesson", None)  # stated for a rollback; an accepted round taught no lesson
        return RoundRecord(
            round=self.round,
            hypothesis=self.hypothesis,
            bucket=self.bucket,
            change=self.change,
            started=self.started,
            test_command=self.test_command,
            harness_command=self.harness_command,
            quick_csv=self.quick_csv,
            incumbent_round=self.incumbent_round,
            seconds=None if self.seconds is None else dict(self.seconds),
            transfer_static=self.transfer_static,
            ignored_editor_files=tuple(self.ignored),
            shared_with={op: tuple(f) for op, f in self.shared_with.items()},
            shared_tested=self.shared_tested,
            **{k: n.get(k, "") for k in ("expected", "lesson", "next_direction", "takeaway")},
            **{k: n.get(k, "") for k in ("summary", "direction")},
            **outcome,
        )

    def failed(
        self,
        category: Category,
        reason: str,
        finished: str,
        *,
        csv: str | None = None,
        out_of_scope: Iterable[str] = (),
        failure: Mapping[str, Any] | None = None,
        failed_tests: Iterable[str] = (),
    ) -> RoundRecord:
        """The ROLLED BACK record of a round that ended before (or without) a decision
        (``failed_tests``: the node ids its failed focused test reported)."""
        return self._record(
            status=Status.ROLLED_BACK,
            category=category,
            reason=reason,
            finished=finished,
            level=self.level,
            csv=csv,
            out_of_scope=tuple(out_of_scope),
            failure=failure,
            failed_tests=tuple(failed_tests),
        )

    def decided(
        self,
        decision: RoundDecision,
        category: Category,
        finished: str,
        *,
        level: str,
        csv: str,
        incumbent_csv: str | None,
        escalated: bool = False,
    ) -> RoundRecord:
        """The record of a measured round: its status and reason are the decision's."""
        return self._record(
            status=decision.status,
            category=category,
            reason=decision.reason,
            finished=finished,
            level=level,
            csv=csv,
            incumbent_csv=incumbent_csv,
            decision=decision,
            escalated=escalated,
        )


def verified_ineffective(records: Iterable[RoundRecord]) -> list[RoundRecord]:
    """The rounds among ``records`` whose rollback proves their direction ineffective."""
    return [r for r in records if r.verified_ineffective]


def write_record(path: Path, record: RoundRecord) -> None:
    """Write ``round.json`` atomically (the decision is final once it is on disk)."""
    atomic_write_json(path, record.to_dict())


def read_record(path: Path) -> RoundRecord:
    """Read a ``round.json``; raises FileNotFoundError when the round has none."""
    return RoundRecord.from_dict(json.loads(Path(path).read_text()))


def category_of(decision: RoundDecision, regression_threshold: float) -> Category:
    """The category of a measured decision: ok, unconfirmed (a large gain that did not hold in
    fresh processes), overfit (rejected by a transfer check), regression (a shape at or past
    the threshold), noise (ambiguous) or no-gain; read from the decision's data."""
    if decision.accepted:
        return Category.OK
    if decision.unconfirmed:
        return Category.UNCONFIRMED
    if decision.overfit:
        return Category.OVERFIT
    if decision.regressions and decision.worst_delta <= -regression_threshold:
        return Category.REGRESSION
    return Category.NOISE if decision.ambiguous else Category.NO_GAIN
