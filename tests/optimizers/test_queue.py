"""The queue optimizer: prepared candidates (a diff and what its round states) proposed once
each, in name order, checked before anything is applied."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernel_ratchet.optimizers.base import OptimizerError
from kernel_ratchet.optimizers.loop import no_proposal
from kernel_ratchet.optimizers.queue import QueueOptimizer
from kernel_ratchet.optimizers.testing import (
    OptimizerConformance,
    RecordedRounds,
    make_toy_project,
    recorded_round,
)


def _diff(root: Path, rel: str, old: str, new: str) -> str:
    """A unified diff of ``rel`` (``old`` replaced by ``new`` once), as ``git diff`` names it."""
    before = (root / rel).read_text()
    assert old in before, old
    after = before.replace(old, new, 1)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
    )
    return "".join(lines)


def _entry(queue: Path, name: str, diff: str, **fields) -> None:
    queue.mkdir(exist_ok=True)
    (queue / f"{name}.diff").write_text(diff)
    (queue / f"{name}.json").write_text(json.dumps({"hypothesis": f"{name} pays", **fields}))


def _queue(root: Path) -> Path:
    queue = root.parent / "queue"
    _entry(queue, "01-block-m", _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 32"))
    _entry(
        queue,
        "02-warps",
        _diff(root, "pkg/configs.py", "Config(128, 128, num_warps=8)", "Config(128, 128)"),
        bucket="K2",
        summary="4 warps on the large tile",
        direction="CONFIGS/fwd/large:num_warps=4",
    )
    return queue


class TestQueueConformance(OptimizerConformance):
    def make_optimizer(self, root: Path) -> QueueOptimizer:
        return QueueOptimizer(str(_queue(root)))


def test_entries_come_in_name_order_once_each_with_their_fields(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    opt = QueueOptimizer(str(_queue(root)))
    rec = RecordedRounds(root, gains={"queue:01-block-m": 0.1})
    first, second = rec.run(opt, 5)  # then None: the queue is spent
    assert (first.direction, first.bucket, first.summary) == (
        "queue:01-block-m",
        "K1",
        "queue entry 01-block-m",
    )
    assert "BLOCK_M = 32" in first.files["pkg/kernel.py"]
    assert (second.direction, second.bucket, second.hypothesis) == (
        "CONFIGS/fwd/large:num_warps=4",
        "K2",
        "02-warps pays",
    )
    # proposed on the incumbent of its turn: the accepted first entry's change is in it
    assert set(second.files) == {"pkg/configs.py"} and opt.settings()["name"] == "queue"


def test_a_resumed_queue_skips_closed_rounds_but_not_an_interrupted_one(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    opt = QueueOptimizer(str(_queue(root)))
    rec = RecordedRounds(root)
    rec.records.append(recorded_round(2, "ROLLED BACK", "no-gain", "h", "queue:01-block-m"))
    warps = "CONFIGS/fwd/large:num_warps=4"
    rec.records.append(recorded_round(3, "ROLLED BACK", "interrupted", "h", warps))
    assert opt.propose(rec.context()).direction == warps  # interrupted: measured again
    rec.records.append(recorded_round(4, "ROLLED BACK", "noise", "h", warps))
    assert opt.propose(rec.context()) is None  # both closed: the queue is spent


def test_an_entry_that_no_longer_applies_stops_with_what_to_do(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    queue = tmp_path / "queue"
    _entry(queue, "01-m32", _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 32"))
    _entry(queue, "02-m64", _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 64"))
    rec = RecordedRounds(root, gains={"queue:01-m32": 0.1})
    opt = QueueOptimizer(str(queue))
    rec.decide(opt.propose(rec.context()))  # accepted: BLOCK_M = 32 is the incumbent's
    before = (root / "pkg/kernel.py").read_text()
    with pytest.raises(OptimizerError, match="02-m64 does not apply to the incumbent"):
        opt.propose(rec.context())
    assert (root / "pkg/kernel.py").read_text() == before  # nothing applied


def test_an_entry_outside_the_kernel_or_without_a_hypothesis_is_refused(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    queue = tmp_path / "queue"
    _entry(queue, "01-test", _diff(root, "tests/test_kernel.py", "assert True", "assert 1"))
    opt = QueueOptimizer(str(queue))
    with pytest.raises(OptimizerError, match="changes tests/test_kernel.py, not the kernel"):
        opt.propose(RecordedRounds(root).context())
    (queue / "01-test.json").write_text('{"expected": "faster"}')
    with pytest.raises(OptimizerError, match='01-test.json: needs a "hypothesis"'):
        QueueOptimizer(str(queue))
    (queue / "01-test.json").unlink()
    with pytest.raises(OptimizerError, match="01-test.diff has no 01-test.json .* move the diff"):
        QueueOptimizer(str(queue))
    with pytest.raises(OptimizerError, match="not a directory"):
        QueueOptimizer(str(tmp_path / "absent"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OptimizerError, match="holds no entry"):
        QueueOptimizer(str(empty))


def test_a_parallel_step_takes_the_next_entries_and_a_superseded_one_comes_back(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    opt = QueueOptimizer(str(_queue(root)))
    rec = RecordedRounds(root)
    both = opt.propose_batch(rec.context(), 4)
    assert [p.direction for p in both] == ["queue:01-block-m", "CONFIGS/fwd/large:num_warps=4"]
    warps = both[1].direction
    rec.records.append(recorded_round(2, "ACCEPTED", "ok", "h", "queue:01-block-m"))
    rec.records.append(recorded_round(3, "ROLLED BACK", "superseded", "h", warps))
    assert [p.direction for p in opt.propose_batch(rec.context(), 4)] == [warps]


def test_a_diff_made_at_the_top_of_a_repository_holding_the_project_applies(tmp_path):
    """``git diff`` names files from the repository's top: a project in a folder of it has its
    kernel files under that folder's name in the diff."""
    root = make_toy_project(tmp_path / "toy")
    queue = tmp_path / "queue"
    diff = _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 32")
    _entry(
        queue,
        "01-m32",
        diff.replace("a/pkg/", "a/kernels/toy/pkg/").replace("b/pkg/", "b/kernels/toy/pkg/"),
    )
    (p,) = RecordedRounds(root).run(QueueOptimizer(str(queue)), 1)
    assert list(p.files) == ["pkg/kernel.py"] and "BLOCK_M = 32" in p.files["pkg/kernel.py"]


def test_a_queue_that_cannot_run_is_refused_before_the_campaign_starts(tmp_path):
    """Before the baseline: an entry outside the op's kernel files, or a first entry that
    does not apply to them as they are, is refused (the op stands in for its OpProfile)."""
    root = make_toy_project(tmp_path / "toy")
    op = SimpleNamespace(name="toy_fwd", kernel_source=("pkg/kernel.py", "pkg/configs.py"))
    queue = _queue(root)
    QueueOptimizer(str(queue)).check_ready(root, op)  # both entries fit
    (root / "pkg/kernel.py").write_text(
        (root / "pkg/kernel.py").read_text().replace("BLOCK_M = 16", "BLOCK_M = 8")
    )
    with pytest.raises(OptimizerError, match="01-block-m does not apply"):
        QueueOptimizer(str(queue)).check_ready(root, op)
    _entry(queue, "03-test", _diff(root, "tests/test_kernel.py", "assert True", "assert 1"))
    with pytest.raises(OptimizerError, match="03-test changes tests/test_kernel.py"):
        QueueOptimizer(str(queue)).check_ready(root, op)


def test_a_diff_that_names_a_path_out_of_the_project_is_refused(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    queue = tmp_path / "queue"
    diff = _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 32")
    outside = tmp_path / "elsewhere" / "pkg" / "kernel.py"
    for bad in (f"{outside}", "../elsewhere/pkg/kernel.py"):
        _entry(
            queue,
            "01-bad",
            diff.replace("a/pkg/kernel.py", f"a/{bad}").replace("b/pkg/kernel.py", f"b/{bad}"),
        )
        with pytest.raises(OptimizerError, match="not the kernel files"):
            QueueOptimizer(str(queue)).propose(RecordedRounds(root).context())
        assert not outside.exists()


def _stacked_queue(root: Path) -> Path:
    """01 raises BLOCK_M, 02 is made on top of it (after 01), 03 on top of 02, 04 alone."""
    queue = root.parent / "stacked"
    kernel = (root / "pkg/kernel.py").read_text()
    step = [("BLOCK_M = 16", "BLOCK_M = 32"), ("BLOCK_M = 32", "BLOCK_M = 64")]
    step.append(("BLOCK_M = 64", "BLOCK_M = 128"))
    prev = ""
    for n, (old, new) in enumerate(step, 1):
        (root / "scratch.py").write_text(kernel)
        diff = _diff(root, "scratch.py", old, new).replace("scratch.py", "pkg/kernel.py")
        name = f"0{n}-{new.split()[-1]}"
        _entry(queue, name, diff, **({"after": prev} if prev else {}))
        kernel, prev = kernel.replace(old, new, 1), name
    (root / "scratch.py").unlink()
    warps = _diff(root, "pkg/configs.py", "Config(128, 128, num_warps=8)", "Config(128, 128)")
    _entry(queue, "04-warps", warps)
    return queue


def test_an_entry_after_another_runs_on_its_acceptance_and_is_skipped_on_its_rollback(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    accepted = RecordedRounds(root, gains={"queue:01-32": 0.1, "queue:02-64": 0.1})
    opt = QueueOptimizer(str(_stacked_queue(root)))
    got = accepted.run(opt, 9)
    assert [p.direction for p in got] == [f"queue:{n}" for n in ("01-32", "02-64", "03-128")] + [
        "queue:04-warps"
    ]
    assert "BLOCK_M = 128" in got[2].files["pkg/kernel.py"]  # on top of both accepted ones
    assert opt.done_note() == ""

    root = make_toy_project(tmp_path / "toy2")
    rolled = RecordedRounds(root)  # every round rolled back
    opt = QueueOptimizer(str(_stacked_queue(root)))
    assert [p.direction for p in rolled.run(opt, 9)] == ["queue:01-32", "queue:04-warps"]
    skipped = "02-64 (after 01-32, which was not accepted); 03-128 (after 02-64, which was not "
    assert opt.done_note() == f"; skipped: {skipped}accepted)"
    stop, why = no_proposal(opt)
    assert stop == "T4" and why.endswith(f"left to try; skipped: {skipped}accepted)")


def test_a_parallel_step_never_takes_an_entry_beside_the_one_it_waits_for(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    opt = QueueOptimizer(str(_stacked_queue(root)))
    batch = opt.propose_batch(RecordedRounds(root).context(), 3)
    assert [p.direction for p in batch] == ["queue:01-32"]


def test_after_must_name_an_earlier_entry(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    queue = tmp_path / "queue"
    _entry(
        queue, "01-m32", _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 32"), after="02-x"
    )
    _entry(queue, "02-x", _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 64"))
    with pytest.raises(OptimizerError, match="01-m32.json: \"after\" names '02-x', not an earlier"):
        QueueOptimizer(str(queue))


def test_an_entry_may_be_a_correctness_fix_said_as_true_or_false(tmp_path):
    root = make_toy_project(tmp_path / "toy")
    queue = tmp_path / "queue"
    _entry(queue, "01-fix", _diff(root, "pkg/kernel.py", "BLOCK_M = 16", "BLOCK_M = 32"), fix=True)
    (fix,) = RecordedRounds(root).run(QueueOptimizer(str(queue)), 2)
    assert fix.fix is True and fix.direction == "queue:01-fix"
    (queue / "01-fix.json").write_text(json.dumps({"hypothesis": "h", "fix": "yes"}))
    with pytest.raises(OptimizerError, match="queue entry 01-fix: fix must be true or false"):
        QueueOptimizer(str(queue)).propose(RecordedRounds(root).context())
