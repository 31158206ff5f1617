"""What a round needs, and nothing of the state machine: :class:`CampaignContext`.

The engine (:mod:`kernel_ratchet.campaign.engine`) opens a campaign under its lock and hands
this context to the round pipeline (:mod:`kernel_ratchet.campaign.rounds`), the lineage
(:mod:`kernel_ratchet.campaign.lineage`) and the other operations: the campaign's paths, its
manifest and op profile, the lock-held :class:`~kernel_ratchet.campaign.state.State`, the
progress callback, and readers of the campaign's CSVs against the frozen schema.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ratchet.campaign.journal import AppendOnlyLog
from kernel_ratchet.campaign.manifest import Manifest
from kernel_ratchet.campaign.state import State
from kernel_ratchet.errors import SchemaError
from kernel_ratchet.harness.csv_schema import BenchTable, Schema, get_schema, read_csv
from kernel_ratchet.profile.schema import OpProfile, Profile
from kernel_ratchet.scoring.metrics import aggregates

Say = Callable[[str], None]


@dataclass
class CampaignContext:
    """One open campaign. ``dir``: the campaign directory; ``root``: where rounds run (the
    project root, or the workspace's ``src/``); ``groot``: the git top level of ``root``;
    ``m`` and ``state`` are re-read when the campaign is opened under its lock;
    ``incumbent_dir``: the incumbent's worktree (None: ``<dir>/.incumbent``; a parallel
    candidate measures against its own copy)."""

    profile: Profile
    dir: Path
    root: Path
    groot: Path
    m: Manifest
    state: State
    say: Say
    incumbent_dir: Path | None = None
    #: Closed rounds' CSVs as first read in this process (:meth:`table`)
    _closed_tables: dict[str, BenchTable] = field(default_factory=dict, repr=False)

    @property
    def op(self) -> OpProfile:
        return self.profile.op(self.m.target_op)

    def save(self) -> None:
        self.state.save(self.dir)

    def log(self, rel: str) -> AppendOnlyLog:
        """The append-only log at ``rel`` (``logs/optimize.md``, ``logs/performance_trend.md``)."""
        return AppendOnlyLog(self.dir, rel, self.state.logs)

    @property
    def schema(self) -> Schema:
        return get_schema(self.m.csv_schema["name"])

    @property
    def kernel_git(self) -> list[str]:
        """The kernel files relative to the git top level."""
        return [os.path.relpath(self.root / k, self.groot) for k in self.m.kernel_source]

    def rel(self, path: Path) -> str:
        return os.path.relpath(path, self.dir)

    def round_dir(self, n: int) -> Path:
        return self.dir / "rounds" / f"round-{n}"

    def table(self, rel: str) -> BenchTable:
        """A CSV of the campaign (``rel`` to its directory), read against the frozen schema.
        A closed round's CSV is read once per process: a round's code that rewrites it and
        puts it back before the round closes (its seal is checked then) changes nothing the
        round reads (:meth:`hold_incumbent` reads the incumbent's before any code runs)."""
        n, pending = _round_of(rel), self.state.pending
        if n is None or n >= self.state.next_round or (pending and pending.round == n):
            # the round in flight writes its CSVs (a quick one, then the full one at the
            # same name when it escalates): read as they are now
            return read_csv(self.dir / rel, expected=self.frozen_schema())
        if rel not in self._closed_tables:
            self._closed_tables[rel] = read_csv(self.dir / rel, expected=self.frozen_schema())
        return self._closed_tables[rel]

    def hold_incumbent(self) -> None:
        """Read the incumbent's CSVs now, before a round's code runs (see :meth:`table`)."""
        for rel in {self.state.incumbent_quick_csv, self.state.incumbent_full_csv} - {None}:
            self.table(rel)

    def incumbent_fails(self, rel: str | None = None) -> set[str]:
        """Shapes the incumbent fails the correctness check on, in its CSV ``rel`` (default:
        its last full validation): a round is not judged on them, as the BASELINE stands on
        the shapes that pass."""
        rel = rel or self.state.incumbent_full_csv
        return {r.label for r in self.table(rel).rows if not r.passed} if rel else set()

    def incumbent_passes_none(self) -> bool:
        """Whether the incumbent's last full validation passes the correctness check on no
        shape (a BASELINE declared wrong on every shape, ``baseline --known-failure``): no
        pair can be timed against it, so only a fix judged on correctness alone may follow."""
        rel = self.state.incumbent_full_csv
        return bool(rel) and not any(r.passed for r in self.table(rel).rows)

    def baseline_table(self) -> BenchTable:
        """Round-1's benchmark CSV (all target shapes), read against the frozen schema."""
        return self.table("rounds/round-1/artifacts/benchmark.csv")

    def frozen_schema(self) -> Schema:
        """The schema frozen at BASELINE; raises SchemaError when this version's differs."""
        sch = self.schema
        frozen = self.m.csv_schema.get("sha256")
        if frozen and frozen != sch.header_sha256:
            raise SchemaError(
                f"the campaign froze a header with sha256 {frozen}, but this kernel-ratchet's "
                f"{sch.name!r} schema hashes to {sch.header_sha256}; use the version that "
                "started the campaign"
            )
        return sch


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or math.isnan(a) or math.isnan(b) or b <= 0:
        return None
    return a / b - 1.0


def vs_base(
    c: CampaignContext, table: BenchTable
) -> tuple[float | None, float | None, float | None]:
    """(step, fwd, bwd) gains of ``table`` over the baseline on the same PASS shapes."""
    labels = [r.label for r in table.rows if r.passed]
    base = aggregates(c.baseline_table().restrict(labels), c.m.campaign_type)
    cur = aggregates(table.restrict(labels), c.m.campaign_type)
    step = _ratio(cur.primary_avg, base.primary_avg) if c.m.campaign_type != "compute_fwd" else None
    return step, _ratio(cur.fwd_avg, base.fwd_avg), _ratio(cur.bwd_avg, base.bwd_avg)


def primary_vs_base(c: CampaignContext, table: BenchTable) -> float | None:
    """The primary metric's gain of ``table`` over the baseline (forward for compute_fwd)."""
    step, fwd, _ = vs_base(c, table)
    return fwd if c.m.campaign_type == "compute_fwd" else step


def _round_of(rel: str) -> int | None:
    """The round a campaign path ``rounds/round-N/...`` belongs to, or None."""
    parts = Path(rel).parts
    if len(parts) > 2 and parts[0] == "rounds" and parts[1].startswith("round-"):
        tail = parts[1][len("round-") :]
        return int(tail) if tail.isdigit() else None
    return None
