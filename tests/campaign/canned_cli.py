"""``python -m tests.campaign.canned_cli ARGS``: the real ``ratchet ARGS`` in its own process,
with a round's measurement replaced by a canned paired decision that accepts (+27.95%).

Everything around the measurement is the command's own: the lock, the write-ahead record and
its stages, the crash-test hook (``KERNEL_RATCHET_FAULT``, a real kill -9), the records. A test
that is about what happens after a decision uses it instead of measuring a round in the Triton
interpreter; the same flows with a real measurement run in the soak run.
"""

from __future__ import annotations

from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.cli import main
from kernel_ratchet.scoring.decision import Status
from tests.decisions import measured_record


def _accepted(c, n, p):
    return measured_record(n, Status.ACCEPTED, 0.2795, Category.OK)


if __name__ == "__main__":
    engine.measure = _accepted
    main()
