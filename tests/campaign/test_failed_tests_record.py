"""A failed focused test's record names every test that failed, not only the reason's three:
the exported records keep no test log, so the record is where the list survives."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.record import RoundDraft, RoundRecord
from kernel_ratchet.campaign.render import summary_md
from kernel_ratchet.campaign.rounds import measure
from kernel_ratchet.campaign.rounds.view import view
from kernel_ratchet.campaign.steps import run_step

FIVE_FAIL = """
import pytest

@pytest.mark.parametrize("shape", ["a x b", "c", "d", "e", "f", "g"])
def test_quant(shape):
    assert shape == "g", f"wrong codes on {shape}"
"""


def test_every_failed_test_reaches_the_round_record_and_its_summary(tmp_path):
    (tmp_path / "test_five.py").write_text(FIVE_FAIL)
    cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_five.py"
    t = run_step("focused test", cmd, cwd=tmp_path, log_path=tmp_path / "t.log", timeout_s=120)
    want = tuple(f"test_five.py::test_quant[{s}]" for s in ["a x b", "c", "d", "e", "f"])
    assert not t.ok and t.failed_tests == want
    assert "and 2 more" in t.reason  # the reason stays one line

    draft = RoundDraft(2, "h", "-", "c", "quick", "t0", cmd, 1)
    rec = measure._after_test(None, draft, tmp_path, t)
    assert rec.category is Category.TEST and rec.failed_tests == want
    on_disk = json.loads(json.dumps(rec.to_dict()))
    assert on_disk["failed_tests"] == list(want)
    assert RoundRecord.from_dict(on_disk) == rec

    c = SimpleNamespace(m=SimpleNamespace(primary_metric="tflops"))
    text = summary_md(view(c, rec))
    assert "Failed tests (5): " in text and all(f"`{node}`" in text for node in want)


def test_a_passing_step_and_an_older_record_name_no_failed_tests(tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_ok.py"
    t = run_step("focused test", cmd, cwd=tmp_path, log_path=tmp_path / "t.log", timeout_s=120)
    assert t.ok and t.failed_tests == ()
    draft = RoundDraft(2, "h", "-", "c", "quick", "t0", cmd, 1)
    old = draft.failed(Category.TEST, "focused test failed", "t1").to_dict()
    assert "failed_tests" not in old  # a record without failures keeps its former keys
    assert RoundRecord.from_dict(old).failed_tests == ()
