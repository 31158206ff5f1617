"""The REPORT's top three next steps come from the campaign (kernel_ratchet.report.next_steps)."""

from __future__ import annotations

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.report.next_steps import GENERIC, next_steps
from kernel_ratchet.scoring.decision import Status

OK, RB = Status.ACCEPTED, Status.ROLLED_BACK


def _closed() -> list[ClosedEntry]:
    return [
        ClosedEntry(2, OK, "full", Category.OK, "wider tiles", gain=0.04),
        ClosedEntry(3, RB, "full", Category.NO_GAIN, "deeper pipeline", gain=0.003),
        ClosedEntry(4, RB, "full", Category.INTERRUPTED, "split-K off", gain=0.02),
        ClosedEntry(5, RB, "full", Category.NOISE, "swizzle", gain=0.01),
    ]


def test_steps_name_the_driver_the_open_round_and_the_shape_moved_least():
    steps = next_steps(
        _closed(),
        ["try stream-K"],
        {"m64": 0.30, "m4096": -0.002},
        {"m64": 70.0, "m4096": 640.0},
        "Combined Step TFLOPS",
        calibrated=False,
    )
    assert steps[0] == "the driver's next direction: try stream-K"
    # the rolled-back round without a verdict and the highest gain: not the verified no-gain one
    assert steps[1].startswith("revisit round-4 (split-K off): rolled back without a verdict")
    assert "+2.00%" in steps[1]
    assert steps[2] == "`ratchet analyze` m4096: the shape the paired chain moved least (-0.20%)"


def test_without_accepted_rounds_the_slowest_shape_and_calibration_come_up():
    steps = next_steps(
        [], [], {}, {"m64": 70.0, "m4096": 640.0}, "Combined Step TFLOPS", calibrated=False
    )
    assert steps[0].startswith("`ratchet analyze` m64: the lowest Combined Step TFLOPS")
    assert steps[1].startswith("`ratchet calibrate`")
    assert steps[2] == GENERIC[0]
    assert next_steps([], [], {}, {}, "x", calibrated=True) == list(GENERIC)


def test_a_rollback_whose_change_a_later_round_accepted_is_not_a_direction(tmp_path):
    """Round 4 was interrupted, round 6 accepted the same kernel files: round 4 is no longer
    a direction to revisit; round 5, another change, still is."""
    import json
    from types import SimpleNamespace

    from kernel_ratchet.report.render import accepted_later

    def snap(n: int, digest: str) -> None:
        d = tmp_path / f"round-{n}" / "kernel_snapshot"
        d.mkdir(parents=True)
        (d / "SNAPSHOT.json").write_text(json.dumps({"files": {"k.py": digest}}))

    for n, digest in ((2, "a"), (4, "b"), (5, "c"), (6, "b")):
        snap(n, digest)
    closed = [*_closed(), ClosedEntry(6, OK, "full", Category.OK, "split-K off again", gain=0.02)]
    c = SimpleNamespace(
        state=SimpleNamespace(closed=closed), round_dir=lambda n: tmp_path / f"round-{n}"
    )
    assert accepted_later(c) == {4: 6}
