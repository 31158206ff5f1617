"""Campaign state: the phase machine and the write-ahead record of the round in flight.

``state.json`` is rewritten atomically after every step. A round in flight is recorded in
``pending`` before any of its work starts; the next command finds it and completes or rolls it
back (see ``engine.recover``), so a crash never leaves a half-closed, missing or duplicated
round.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.fsutil import atomic_write_json
from kernel_ratchet.errors import CampaignError


class Phase(str, Enum):
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


@dataclass
class State:
    phase: Phase = Phase.INITIALIZED
    next_round: int = 1
    incumbent_round: int | None = None
    incumbent_commit: str | None = None
    incumbent_full_csv: str | None = None  # latest full-level CSV of the incumbent lineage
    incumbent_quick_csv: str | None = None  # the incumbent's CSV holding the quick-level shapes
    consecutive_rollbacks: int = 0
    pending: dict[str, Any] | None = None
    closed: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, dict[str, Any]] = field(default_factory=dict)
    ambient: dict[str, str | None] = field(default_factory=dict)
    harness_sha256: str | None = None
    termination: dict[str, str] | None = None

    def save(self, campaign_dir: Path) -> None:
        d = asdict(self)
        d["phase"] = self.phase.value
        atomic_write_json(Path(campaign_dir) / "state.json", d)

    @classmethod
    def load(cls, campaign_dir: Path) -> State:
        path = Path(campaign_dir) / "state.json"
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            raise CampaignError(f"{path} is missing; the campaign was never initialized") from None
        except json.JSONDecodeError as exc:
            raise CampaignError(f"{path} is not valid JSON ({exc}); do not edit it") from None
        d["phase"] = Phase(d["phase"])
        return cls(**d)

    def closed_round(self, n: int) -> dict[str, Any] | None:
        return next((r for r in self.closed if r["round"] == n), None)
