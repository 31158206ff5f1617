"""ops.<op>.knobs in ratchet.yaml, and the search-space lines of the checklist."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.profile.checklist import run_checklist
from kernel_ratchet.profile.loader import load_profile

FIXTURES = Path(__file__).parents[1] / "knobs" / "fixtures"


def _space_item(p):
    items = {i.name.split(": ", 1)[1]: i for i in run_checklist(load_profile(p.write()))}
    return items["search space"]


def test_declared_knobs_load_as_records(tiny_project):
    p = tiny_project()
    kernel = f"{p.pkg}/kernel.py"
    p.op["knobs"] = [
        {"name": "BLOCK", "file": f"./{kernel}", "within": "launch", "values": [64, 128]},
        {"name": "num_stages", "file": kernel, "values": []},
    ]
    op = load_profile(p.write()).op("gemm_bf16")
    assert op.knobs == (
        KnobDecl("BLOCK", kernel, (64, 128), within="launch"),
        KnobDecl("num_stages", kernel, ()),
    )
    assert load_profile(p.write()).op("gemm_bf16").knobs[0].where == f"{kernel} in launch"


def test_every_bad_declaration_is_named_with_its_fix(tiny_project):
    p = tiny_project()
    kernel = f"{p.pkg}/kernel.py"
    p.op["knobs"] = [
        {"name": "BLOCK", "file": kernel, "values": [1], "where": "x"},
        {"name": "not a name", "file": kernel, "values": [1]},
        {"name": "B", "file": f"{p.pkg}/adapter.py", "values": [1]},
        {"name": "B", "file": kernel, "values": [1, 1]},
        {"name": "B", "file": kernel, "values": [{"a": 1}]},
        {"name": "C", "file": kernel},
        "BLOCK",
    ]
    with pytest.raises(ProfileError) as exc:
        load_profile(p.write())
    msg = str(exc.value)
    for key in ("[0].where", "[1].name", "[2].file", "[3].values", "[4].values", "[5].values"):
        assert f"ops.gemm_bf16.knobs{key}" in msg, key
    assert "kernel_source" in msg and "repeats a value" in msg and "ops.gemm_bf16.knobs[6]" in msg
    p.op["knobs"] = {"name": "BLOCK"}
    with pytest.raises(ProfileError, match=r"knobs: expected a list of knobs"):
        load_profile(p.write())


def test_a_declared_twice_knob_is_refused(tiny_project):
    p = tiny_project()
    decl = {"name": "B", "file": f"{p.pkg}/kernel.py", "values": [1, 2]}
    p.op["knobs"] = [decl, dict(decl)]
    with pytest.raises(ProfileError, match="declared twice"):
        load_profile(p.write())


@pytest.mark.parametrize("fixture,what", [("autotuned", "autotune 6"), ("settings", "launch 3")])
def test_kernels_as_written_get_a_search_space(tiny_project, fixture, what):
    p = tiny_project()
    shutil.copy(FIXTURES / f"{fixture}.py", p.root / p.pkg / "kernel.py")
    item = _space_item(p)
    assert item.ok and not item.warning
    assert f"points ({what}) in the op's files: " in item.detail
    assert not item.detail.startswith("0 knobs")
    assert "only the knobs of kernels the baseline launches" in item.detail
    assert "BLOCK_SIZE, num_warps, num_stages" in item.detail  # the knobs, named


def test_nothing_to_move_is_a_warning_and_a_bad_declaration_fails(tiny_project):
    p = tiny_project()
    item = _space_item(p)
    assert item.ok and item.warning and "refuses to start" in item.detail
    p.op["knobs"] = [{"name": "MISSING", "file": f"{p.pkg}/kernel.py", "values": [1, 2]}]
    item = _space_item(p)
    assert not item.ok and "MISSING" in item.detail and "ops.gemm_bf16.knobs" in item.fix
    (p.root / p.pkg / "kernel.py").write_text("MISSING = 1\n")
    item = _space_item(p)
    assert item.ok and item.detail.startswith("1 knob, 2 points")


def test_the_projects_own_ops_name_tunables_the_search_can_move():
    """Every op of this repository's ratchet.yaml passes its search-space lines: a tunables
    file that holds nothing to move fails `ratchet check` for users reading our profile."""
    from kernel_ratchet.profile.search_check import search_items

    profile = load_profile(Path(__file__).parents[2] / "ratchet.yaml")
    failed = [
        f"{i.name}: {i.detail}"
        for op in profile.ops.values()
        for i in search_items(profile, op)
        if not i.ok
    ]
    assert not failed, failed


def test_check_fails_where_the_search_would_refuse_to_start(tiny_project):
    """A knob declared in a kernel file that is not Python: `ratchet run --optimizer search`
    refuses it, and `ratchet check` says so first; a non-Python kernel file alone is fine."""
    from kernel_ratchet.optimizers.base import OptimizerError
    from kernel_ratchet.optimizers.search import SearchOptimizer

    p = tiny_project()
    shutil.copy(FIXTURES / "settings.py", p.root / p.pkg / "kernel.py")
    (p.root / p.pkg / "tune.yaml").write_text("softmax:\n  TILE_N: 64\n")
    p.op["kernel_source"] = [f"{p.pkg}/kernel.py", f"{p.pkg}/tune.yaml"]
    assert _space_item(p).ok
    p.op["knobs"] = [{"name": "TILE_N", "file": f"{p.pkg}/tune.yaml", "values": [32, 64]}]
    item = _space_item(p)
    assert not item.ok and "not a Python file" in item.detail and "refuses" in item.fix
    op = load_profile(p.write()).op("gemm_bf16")
    with pytest.raises(OptimizerError, match="not a Python file"):
        SearchOptimizer().check_ready(p.root, op)
