"""Conformance suite for optimizers, run on the CPU against recorded rounds (no harness).

Like ``optuna.testing``: an optimizer's test module subclasses :class:`OptimizerConformance`,
implements :meth:`~OptimizerConformance.make_optimizer` and inherits the tests. The project is a
synthetic one (:func:`make_toy_project`) and the rounds are synthetic records decided by a
:class:`RecordedRounds` table (Kernel Tuner's ``SimulationRunner`` idea): a proposal's direction
looks up its recorded gain, a positive gain is ACCEPTED (its files become the incumbent), the
rest is ROLLED BACK (the files are restored).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from kernel_ratchet.campaign.record import RoundRecord, verified_ineffective
from kernel_ratchet.guard.static_audit import BUCKETS
from kernel_ratchet.optimizers.base import Optimizer, OptimizerContext, Proposal

TOY_KERNEL = '''"""A toy kernel file with module-level knobs."""

BLOCK_M = 16
BLOCK_N = 16
BLOCK_K = 16
SEARCH_SPACE = {"*": {"BLOCK_M": [16, 32, 64], "BLOCK_N": [16, 32, 64], "BLOCK_K": [8, 16, 32]}}


def kernel(a, b):
    return a @ b
'''

TOY_CONFIGS = '''"""Toy tunables: kind -> bucket -> Config."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    block_m: int = 64
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3
    persistent: bool = False


def bucket_for(M, N, K):
    return "small" if M * N < 4096 else "large"


CONFIGS = {
    "fwd": {
        "large": Config(128, 128, num_warps=8),  # measured: see the log
        "small": Config(32, 32, num_stages=2),
    },
    "bwd": {"large": Config(64, 128)},
}
SEARCH_SPACE = {
    "*": {"num_warps": [1, 2, 4, 8], "num_stages": [2, 3, 4], "persistent": [True, False]},
    "large": {"block_m": [64, 128, 256], "block_n": [64, 128, 256]},
}
'''

KERNEL_SOURCE = ("pkg/kernel.py", "pkg/configs.py")
PROTECTED = ("ratchet.yaml", "pkg/adapter.py", "tests/test_kernel.py")
SHAPES = [
    {"label": "s32", "M": 32, "N": 32, "K": 64, "B": 1},
    {"label": "l256", "M": 256, "N": 256, "K": 256, "B": 1},
    {"label": "l512", "M": 512, "N": 256, "K": 128, "B": 1},
]


def make_toy_project(root: Path) -> Path:
    """A small project: two kernel files (one with module knobs, one nested-dict tunables)
    and the protected files a round must not touch."""
    files = {
        "pkg/__init__.py": "",
        "pkg/kernel.py": TOY_KERNEL,
        "pkg/configs.py": TOY_CONFIGS,
        "pkg/adapter.py": "# adapter (protected)\n",
        "pkg/bench.py": "# benchmark\n",
        "tests/test_kernel.py": "def test_ok():\n    assert True\n",
        "ratchet.yaml": "project: toy\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (outside ``.ratchet``), by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".ratchet" not in p.parts
    }


class RecordedRounds:
    """Synthetic campaign state: the incumbent's files and the round records so far.

    ``gains`` maps a direction to its recorded gain (missing: ``default_gain``). ``decide``
    turns a proposal into the record the engine would have written.
    """

    def __init__(
        self,
        root: Path,
        gains: Mapping[str, float] | Callable[[str], float] = (),
        default_gain: float = -0.01,
        tunables: str = "pkg/configs.py",
    ) -> None:
        self.root = Path(root)
        self.gains = gains if callable(gains) else dict(gains)
        self.default_gain = default_gain
        self.tunables = tunables
        self.incumbent = {rel: (self.root / rel).read_text() for rel in KERNEL_SOURCE}
        self.records: list[RoundRecord] = [
            recorded_round(1, "BASELINE", "baseline", "Baseline", "")
        ]

    def context(self, analysis: Mapping[str, Any] | None = None) -> OptimizerContext:
        manifest = {
            "target_op": "toy_fwd",
            "kernel_source": list(KERNEL_SOURCE),
            "primary_metric": "Forward TFLOPS",
            "target_shapes": SHAPES,
            "representative_shapes": [s["label"] for s in SHAPES],
            "test_command": "pytest tests/test_kernel.py -q",
        }
        return OptimizerContext(
            root=self.root,
            manifest=manifest,
            sources=dict(self.incumbent),
            rounds=tuple(self.records),
            ineffective=tuple(verified_ineffective(self.records)),
            tips="",
            analysis=analysis,
            tunables=self.tunables,
            campaign_dir=None,
            round_no=len(self.records) + 1,
            protected=PROTECTED,
        )

    def gain(self, direction: str) -> float:
        if callable(self.gains):
            return self.gains(direction)
        return self.gains.get(direction, self.default_gain)

    def decide(self, p: Proposal, category: str | None = None) -> RoundRecord:
        """Apply ``p``, decide it from the recorded gain (or force ``category``), restore or
        keep the files like the engine, and return the round record."""
        p.apply_to(self.root)
        n = len(self.records) + 1
        g = self.gain(p.direction)
        if category is None:
            category = "ok" if g > 0 else "no-gain"
        status = "ACCEPTED" if category == "ok" else "ROLLED BACK"
        rec = recorded_round(n, status, category, p.hypothesis, p.direction, g, summary=p.summary)
        self.records.append(rec)
        if status == "ACCEPTED":
            self.incumbent = {rel: (self.root / rel).read_text() for rel in KERNEL_SOURCE}
        else:
            for rel, text in self.incumbent.items():
                (self.root / rel).write_text(text)
        return rec

    def run(self, opt: Optimizer, rounds: int, analysis=None) -> list[Proposal]:
        """Up to ``rounds`` propose/decide/observe cycles; stops at the first None."""
        out = []
        for _ in range(rounds):
            p = opt.propose(self.context(analysis))
            if p is None:
                break
            out.append(p)
            opt.observe(self.decide(p))
        return out


def recorded_round(
    n: int,
    status: str,
    category: str,
    hypothesis: str = "h",
    direction: str = "",
    gain: float | None = None,
    **fields: Any,
) -> RoundRecord:
    """A synthetic round record as the engine would close it (no measurement behind it)."""
    values = {"bucket": "K1", "level": "quick", "reason": f"recorded gain {gain}", **fields}
    return RoundRecord(
        round=n,
        status=status,
        category=category,
        hypothesis=hypothesis,
        direction=direction,
        **values,
    )


class OptimizerConformance:
    """Tests every optimizer passes. Subclass and implement ``make_optimizer``.

    ``proposes`` is False for an optimizer that never proposes (``manual``).
    """

    proposes = True
    rounds = 6

    def make_optimizer(self, root: Path) -> Optimizer:
        raise NotImplementedError

    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        return make_toy_project(tmp_path / "toy")

    def test_proposal_states_its_hypothesis_and_a_known_bucket(self, project: Path) -> None:
        opt = self.make_optimizer(project)
        p = opt.propose(RecordedRounds(project).context())
        if not self.proposes:
            assert p is None
            return
        assert isinstance(p, Proposal)
        assert p.hypothesis.strip() and p.summary.strip() and p.direction.strip()
        assert p.bucket in BUCKETS and p.bucket not in ("W2", "W3")

    def test_only_kernel_files_change(self, project: Path) -> None:
        opt = self.make_optimizer(project)
        rec = RecordedRounds(project)
        before = tree_hashes(project)
        for p in rec.run(opt, self.rounds):
            assert set(p.files or {}) <= set(KERNEL_SOURCE), p.files
        # restored kernel files aside, nothing else may have changed
        for rel in KERNEL_SOURCE:
            (project / rel).write_text(rec.incumbent[rel])
        after = tree_hashes(project)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        assert changed <= set(KERNEL_SOURCE), changed

    def test_never_repeats_a_verified_ineffective_direction(self, project: Path) -> None:
        opt = self.make_optimizer(project)
        rec = RecordedRounds(project, default_gain=-0.02)
        proposals = rec.run(opt, self.rounds)
        directions = [p.direction for p in proposals]
        assert len(directions) == len(set(directions)), directions

    @pytest.mark.parametrize(
        "status,category",
        [("ACCEPTED", "ok"), ("BASELINE", "baseline")]
        + [
            ("ROLLED BACK", c)
            for c in (
                "scope",
                "build",
                "test",
                "harness",
                "schema",
                "correctness",
                "regression",
                "noise",
                "no-gain",
                "interrupted",
            )
        ],
    )
    def test_observe_tolerates_every_status(self, project: Path, status, category) -> None:
        opt = self.make_optimizer(project)
        opt.observe(recorded_round(2, status, category, "h", "d", 0.0))
        opt.observe(RoundRecord(round=3, status=status, category=category))
