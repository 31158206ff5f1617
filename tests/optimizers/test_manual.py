"""The manual optimizer proposes nothing and hands the campaign to a person."""

from __future__ import annotations

from pathlib import Path

from kernel_ratchet.optimizers.manual import ManualOptimizer
from kernel_ratchet.optimizers.testing import OptimizerConformance, RecordedRounds


class TestManualConformance(OptimizerConformance):
    proposes = False

    def make_optimizer(self, root: Path) -> ManualOptimizer:
        return ManualOptimizer()


def test_manual_is_interactive(tmp_path):
    from kernel_ratchet.optimizers.testing import make_toy_project

    root = make_toy_project(tmp_path / "toy")
    opt = ManualOptimizer()
    assert opt.interactive and opt.propose(RecordedRounds(root).context()) is None
    assert "ratchet validate --hypothesis" in opt.instructions
    assert "pkg/kernel.py" in opt.instructions
