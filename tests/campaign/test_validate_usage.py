"""Mistyped validate options are the caller's mistake (exit 2), refused before any round."""

from __future__ import annotations

import pytest

from kernel_ratchet.errors import UsageError

from .conftest import KERNEL, set_blocks


@pytest.mark.parametrize("kw", [{"level": "bogus"}, {"bucket": "Z9"}], ids=["level", "bucket"])
def test_an_unknown_level_or_bucket_is_a_usage_error_before_any_round(project, open_campaign, kw):
    set_blocks(project, M=32, N=32)
    edited = (project / KERNEL).read_text()
    with open_campaign() as c, pytest.raises(UsageError) as err:
        c.validate("32x32 tiles", **kw)
    assert err.value.exit_code == 2
    assert ("quick or full, not 'bogus'" if "level" in kw else "bucket must be one of") in str(
        err.value
    )
    with open_campaign() as c:
        assert c.state.next_round == 2 and c.state.pending is None
    assert (project / KERNEL).read_text() == edited  # the edit stays for the next attempt
