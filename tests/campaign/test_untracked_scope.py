"""An untracked file that appears during a campaign refuses the next round with advice that
works: git's own exclude file, which needs no commit."""

from __future__ import annotations

import pytest

from kernel_ratchet.campaign.lineage.kernel import out_of_scope
from kernel_ratchet.errors import CampaignError

from .conftest import set_blocks


def test_a_new_untracked_file_is_refused_and_excluding_it_clears_the_scope(project, open_campaign):
    (project / "sweep.json").write_text("{}\n")
    set_blocks(project, M=32, N=32)
    with open_campaign() as c, pytest.raises(CampaignError) as err:
        c.validate("32x32 tiles")
    assert "sweep.json" in str(err.value) and ".git/info/exclude" in str(err.value)
    exclude = project / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text((exclude.read_text() if exclude.exists() else "") + "sweep.json\n")
    with open_campaign() as c:
        assert out_of_scope(c.ctx) == [] and c.state.next_round == 2
