"""A round that fails the harness's checks says why in its decision, not only where: the
harness keeps each failing shape's reason beside its CSV (:mod:`kernel_ratchet.harness.
failures`) and the round quotes it."""

from __future__ import annotations

import pytest

from tests.campaign.conftest import KERNEL

SHAPE_MEMO = """

_SEEN = {}
_compute = matmul_nt


def matmul_nt(a, b):  # each shape's first product, returned again for new inputs
    key = (tuple(a.shape), tuple(b.shape))
    if key not in _SEEN:
        _SEEN[key] = _compute(a, b)
    return _SEEN[key]
"""


@pytest.mark.slow
def test_a_stale_output_is_rolled_back_with_the_harness_reason(accepted_project, open_accepted):
    """Each shape called once (the focused test) passes; the harness's timed calls find the
    buffer they poisoned returned unwritten, and the decision names that."""
    path = accepted_project / KERNEL
    path.write_text(path.read_text() + SHAPE_MEMO)
    with open_accepted() as c:
        rec = c.validate("return each shape's product again")
    assert rec.status == "ROLLED BACK" and rec.category == "correctness", rec.reason
    assert rec.reason.startswith("Check=FAIL on "), rec.reason
    assert "CheatDetected" in rec.reason and "NaN poison" in rec.reason, rec.reason
    assert "_SEEN" not in path.read_text()  # rolled back
