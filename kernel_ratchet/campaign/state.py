"""Campaign state: the phase machine and the write-ahead record of the round in flight.

``state.json`` is rewritten atomically after every step. A round in flight is recorded in
``pending`` (a :class:`PendingRound`) before any of its work starts; the next command finds it
and completes or rolls it back (see ``engine.Campaign.recover``), so a crash never leaves a
half-closed, missing or duplicated round. ``closed`` holds one :class:`ClosedEntry` per closed
round, the index that ``ratchet status``, the REPORT and the termination check read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.category import Category, check_outcome, is_verified_ineffective
from kernel_ratchet.campaign.fsutil import atomic_write_json
from kernel_ratchet.campaign.record import NOTE_KEYS
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.scoring.decision import Status


class Phase(str, Enum):
    """Where the campaign is in SPEC section 2's loop."""

    INITIALIZED = "INITIALIZED"  # DEFINE_TARGET, PREPARE_ENVIRONMENT, READ_HISTORICAL_TIPS done
    OPTIMIZING = "OPTIMIZING"  # BASELINE done; rounds run
    TERMINATED = "TERMINATED"  # a termination condition held; REPORT written
    ACCEPTED = "ACCEPTED"  # ACCEPTANCE passed in the project


class Stage(str, Enum):
    """Where a pending round is. Everything up to MEASURING is redone as a rollback."""

    MEASURING = "MEASURING"  # snapshot taken; test / harness running
    DECIDED = "DECIDED"  # round.json written: the decision is final
    APPLIED = "APPLIED"  # commit made or kernel files restored
    RECORDED = "RECORDED"  # summary, trend row, log section written


@dataclass(frozen=True)
class PendingRound:
    """The round in flight. The BASELINE's has no hypothesis, bucket or level; ``notes`` are
    the driver's optional notes (keys from ``record.NOTE_KEYS``, only those given); ``commit``
    is known from APPLIED on (None: nothing was committed). Raises ValueError on an unknown
    note key."""

    round: int
    stage: Stage
    started: str
    hypothesis: str | None = None
    bucket: str | None = None
    level: str | None = None
    notes: Mapping[str, str] = field(default_factory=dict)
    commit: str | None = None
    rehearsal: bool = False  # run with ``--rehearse``: its record is a rehearsal's, however it ends
    test_shared: bool = False  # ``--test-shared``: the tests of ops sharing a changed file gate it
    fix: bool = False  # ``--fix``: a correctness fix, accepted when not slower (scoring.paired_fix)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage(self.stage))
        object.__setattr__(self, "notes", dict(self.notes))
        unknown = sorted(set(self.notes) - set(NOTE_KEYS))
        if unknown:
            raise ValueError(f"unknown round notes {unknown}; allowed: {list(NOTE_KEYS)}")

    def at(self, stage: Stage, **changes: Any) -> PendingRound:
        """This round moved on to ``stage``."""
        return replace(self, stage=stage, **changes)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "round": self.round,
            "stage": self.stage.value,
            "started": self.started,
        }
        if self.hypothesis is not None:
            d.update(hypothesis=self.hypothesis, bucket=self.bucket, level=self.level)
            d.update(self.notes)
        if self.stage in (Stage.APPLIED, Stage.RECORDED):
            d["commit"] = self.commit
        if self.rehearsal:
            d["rehearsal"] = True
        if self.test_shared:
            d["test_shared"] = True
        if self.fix:
            d["fix"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PendingRound:
        return cls(
            round=d["round"],
            stage=Stage(d["stage"]),
            started=d.get("started", ""),
            hypothesis=d.get("hypothesis"),
            bucket=d.get("bucket"),
            level=d.get("level"),
            notes={k: d[k] for k in NOTE_KEYS if k in d},
            commit=d.get("commit"),
            rehearsal=bool(d.get("rehearsal", False)),
            test_shared=bool(d.get("test_shared", False)),
            fix=bool(d.get("fix", False)),
        )


@dataclass(frozen=True)
class ClosedEntry:
    """A closed round in the state's index. ``gain``: its decision's, against its incumbent;
    ``vs_baseline``: its harness CSV against the BASELINE's; ``paired_chain``: its candidate
    against the BASELINE through the paired A/Bs. ``chain_kept`` is False for an entry written
    before the chain was kept (it is rebuilt from the round record when read)."""

    round: int
    status: Status
    level: str
    category: Category
    hypothesis: str
    gain: float | None = None
    vs_baseline: float | None = None
    paired_chain: float | None = None
    commit: str | None = None
    finished: str | None = None
    chain_kept: bool = True
    rehearsal: str | None = None  # a rehearsal round's label ("REHEARSAL: would accept")

    @property
    def label(self) -> str:
        """The status as shown (a rehearsal round's label)."""
        return self.rehearsal or self.status.value

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "category", Category(self.category))
        check_outcome(self.status, self.category)

    @property
    def verified_ineffective(self) -> bool:
        return is_verified_ineffective(self.status, self.category)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _ENTRY_SPECIAL}
        d.update(status=self.status.value, category=self.category.value)
        if self.chain_kept:
            d["paired_chain"] = self.paired_chain
        if self.rehearsal:
            d["rehearsal"] = self.rehearsal
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClosedEntry:
        return cls(
            round=d["round"],
            status=Status(d["status"]),
            level=d.get("level", "quick"),
            category=Category(d["category"]),
            hypothesis=d.get("hypothesis", ""),
            gain=d.get("gain"),
            vs_baseline=d.get("vs_baseline"),
            paired_chain=d.get("paired_chain"),
            commit=d.get("commit"),
            finished=d.get("finished"),
            chain_kept="paired_chain" in d,
            rehearsal=d.get("rehearsal"),
        )


_ENTRY_SPECIAL = ("status", "category", "paired_chain", "chain_kept", "rehearsal")


@dataclass(frozen=True)
class Termination:
    """Why the campaign ended: ``code`` T1-T4, ``at`` (timestamp), ``reason``."""

    code: str
    at: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "at": self.at, "reason": self.reason}


@dataclass
class State:
    """The campaign's mutable state, held under the campaign lock and saved after each step."""

    phase: Phase = Phase.INITIALIZED
    next_round: int = 1
    incumbent_round: int | None = None
    incumbent_commit: str | None = None
    incumbent_full_csv: str | None = None  # latest full-level CSV of the incumbent lineage
    incumbent_quick_csv: str | None = None  # the incumbent's CSV holding the quick-level shapes
    consecutive_rollbacks: int = 0
    pending: PendingRound | None = None
    closed: list[ClosedEntry] = field(default_factory=list)
    logs: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: dict[str, str | None] = field(default_factory=dict)  # sealed files: sha256
    ambient: dict[str, str | None] = field(default_factory=dict)
    #: Files ``ratchet export`` wrote inside the project (relative to the git top level):
    #: the tool's own records, not changes a round could read.
    exported: list[str] = field(default_factory=list)
    harness_sha256: str | None = None
    termination: Termination | None = None
    # a rehearsal campaign (Triton interpreter): every round is labelled and rolled back
    rehearsal: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(
            phase=self.phase.value,
            pending=None if self.pending is None else self.pending.to_dict(),
            closed=[e.to_dict() for e in self.closed],
            termination=None if self.termination is None else self.termination.to_dict(),
        )
        return d

    def save(self, campaign_dir: Path) -> None:
        atomic_write_json(Path(campaign_dir) / "state.json", self.to_dict())

    @classmethod
    def load(cls, campaign_dir: Path) -> State:
        path = Path(campaign_dir) / "state.json"
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            if (path.parent / "manifest.yaml").exists():
                raise CampaignError(
                    f"{path} is missing, though the campaign's manifest is there: it was "
                    "deleted or moved. Restore it (a git checkout or backup of the campaign "
                    "directory); the rounds' own records are untouched"
                ) from None
            raise CampaignError(f"{path} is missing; the campaign was never initialized") from None
        except json.JSONDecodeError as exc:
            raise CampaignError(
                f"{path} is not valid JSON ({exc}); it is written by the tool only: restore it "
                "(a git checkout or backup of the campaign directory) or start a new campaign"
            ) from None
        try:
            return cls._from_dict(d)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CampaignError(
                f"{path} is not a campaign state ({type(exc).__name__}: {exc}); it is written "
                "by the tool only: restore it from a backup or start a new campaign"
            ) from None

    @classmethod
    def _from_dict(cls, d: dict[str, Any]) -> State:
        d = dict(d)
        d["phase"] = Phase(d["phase"])
        d["pending"] = PendingRound.from_dict(d["pending"]) if d.get("pending") else None
        d["closed"] = [ClosedEntry.from_dict(e) for e in d.get("closed") or []]
        t = d.get("termination")
        d["termination"] = Termination(t["code"], t["at"], t["reason"]) if t else None
        return cls(**d)

    def closed_round(self, n: int) -> ClosedEntry | None:
        return next((r for r in self.closed if r.round == n), None)
