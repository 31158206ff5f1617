"""The DEFINE_TARGET checklist, env_check and git_check on tiny temp projects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.checklist import (
    CheckItem,
    device_check,
    env_check,
    git_check,
    run_checklist,
    work_check,
)
from kernel_ratchet.profile.loader import load_profile


def _by_name(items: list[CheckItem]) -> dict[str, CheckItem]:
    return {i.name.split(": ", 1)[1]: i for i in items}


def test_checklist_all_ok_for_a_good_project(tiny_project):
    p = tiny_project()
    items = run_checklist(load_profile(p.write()))
    bad = [i for i in items if not i.ok]
    assert not bad, bad
    names = set(_by_name(items))
    assert {
        "kernel source exists",
        "focused test command given",
        "benchmark command given",
        "adapter importable",
        "adapter schema",
        "shapes loadable",
        "scoring rule known",
        "execution mode and rebuild decided",
        "tunables file",
        "search space",
    } <= names
    assert str(p.root) not in sys.path  # sys.path restored


def test_missing_kernel_file_is_named(tiny_project):
    p = tiny_project()
    p.op["kernel_source"] = [f"{p.pkg}/kernel.py", f"{p.pkg}/nowhere/missing.py"]
    item = _by_name(run_checklist(load_profile(p.write())))["kernel source exists"]
    assert not item.ok
    assert f"{p.pkg}/nowhere/missing.py" in item.detail and f"{p.pkg}/kernel.py" not in item.detail
    assert "kernel_source" in item.fix


@pytest.mark.parametrize(
    ("where", "ok"),
    [("{pkg}/kernel.py {pkg}/helpers.py", True), ("{pkg}/kernel.py {pkg}s/helpers.py", False),
     ("{pkg}/helpers.py", False)],
    ids=["beside-an-existing-file", "no-such-directory", "no-file-of-the-op-exists"],
)  # fmt: skip
def test_a_new_kernel_file_is_taken_only_beside_an_existing_one(tiny_project, where, ok):
    """A file a round will create may be missing; a missing directory, or an op none of whose
    kernel files exists, is a path to correct."""
    p = tiny_project()
    p.op["kernel_source"] = where.format(pkg=p.pkg).split()
    item = _by_name(run_checklist(load_profile(p.write())))["kernel source exists"]
    assert item.ok is ok, item.detail
    if ok:
        assert f"new, a round may create: {p.pkg}/helpers.py" in item.detail
    else:
        assert "helpers.py" in item.detail and "kernel_source" in item.fix


def test_unimportable_adapter(tiny_project):
    p = tiny_project()
    p.op["adapter"] = f"{p.pkg}.nowhere:GemmAdapter"
    items = _by_name(run_checklist(load_profile(p.write())))
    assert not items["adapter importable"].ok
    assert f"{p.pkg}.nowhere" in items["adapter importable"].detail
    assert "pip install -e ." in items["adapter importable"].fix
    assert not items["adapter schema"].ok


def test_adapter_raising_at_import_is_a_failed_item(tiny_project):
    p = tiny_project()
    (p.root / p.pkg / "broken.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    p.op["adapter"] = f"{p.pkg}.broken:X"
    item = _by_name(run_checklist(load_profile(p.write())))["adapter importable"]
    assert not item.ok and "boom" in item.detail
    # the project's own code failed: the fix says where, not "install the project"
    assert f"raised at import ({p.pkg}/broken.py:2)" in item.fix and "pip" not in item.fix


def test_schema_mismatch_with_campaign_type(tiny_project):
    p = tiny_project(schema="gemm")
    p.op["campaign_type"] = "memory"
    item = _by_name(run_checklist(load_profile(p.write())))["adapter schema"]
    assert not item.ok
    assert "'gemm'" in item.detail and "'memory'" in item.detail and item.fix


def test_unknown_adapter_schema(tiny_project):
    p = tiny_project(schema="conv")
    item = _by_name(run_checklist(load_profile(p.write())))["adapter schema"]
    assert not item.ok and "conv" in item.detail


def test_shapes_empty_or_missing(tiny_project):
    p = tiny_project()
    p.op["shapes"] = f"{p.pkg}.shapes:empty"
    item = _by_name(run_checklist(load_profile(p.write())))["shapes loadable"]
    assert not item.ok and "empty" in item.detail
    p.op["shapes"] = f"{p.pkg}.shapes:nothing"
    item = _by_name(run_checklist(load_profile(p.write())))["shapes loadable"]
    assert not item.ok


def test_tunables_must_exist_when_given(tiny_project):
    p = tiny_project()
    p.op["tunables"] = f"{p.pkg}/configs.py"
    item = _by_name(run_checklist(load_profile(p.write())))["tunables file"]
    assert not item.ok and "configs.py" in item.detail
    (p.root / p.pkg / "configs.py").write_text("CONFIGS = []\n")
    item = _by_name(run_checklist(load_profile(p.write())))["tunables file"]
    assert not item.ok and "nothing in it can move" in item.detail and "SEARCH_SPACE" in item.fix
    (p.root / p.pkg / "configs.py").write_text("B = 16\nSEARCH_SPACE = {'*': {'B': [16, 32]}}\n")
    items = _by_name(run_checklist(load_profile(p.write())))
    assert items["tunables file"].ok
    # no kernel file reads B yet: the search would spend rounds on it
    assert (
        items["search space"].warning and "no kernel file reads B" in items["search space"].detail
    )
    (p.root / p.pkg / "kernel.py").write_text("from . import configs\n\nTILE = configs.B\n")
    space = _by_name(run_checklist(load_profile(p.write())))["search space"]
    assert not space.warning and "(tunables 1) in the op's files: module: B (" in space.detail
    # a file that does not parse, or names a knob it does not define, says so (not "add one")
    (p.root / p.pkg / "configs.py").write_text("B = 16\nSEARCH_SPACE = {'*': {'B': [16, 32]}\n")
    item = _by_name(run_checklist(load_profile(p.write())))["tunables file"]
    assert not item.ok and "does not parse" in item.detail and "configs.py" in item.detail
    assert "SEARCH_SPACE naming" not in item.fix
    (p.root / p.pkg / "configs.py").write_text("B = 16\nSEARCH_SPACE = {'*': {'BB': [16, 32]}}\n")
    item = _by_name(run_checklist(load_profile(p.write())))["tunables file"]
    assert not item.ok and "SEARCH_SPACE names BB, which the file does not define" in item.detail


def test_checklist_for_one_op_and_unknown_op(tiny_project):
    p = tiny_project()
    second = dict(p.op, adapter=f"{p.pkg}.nowhere:A")
    p.data["ops"]["other"] = second
    prof = load_profile(p.write())
    assert all(i.name.startswith("gemm_bf16:") for i in run_checklist(prof, "gemm_bf16"))
    assert any(not i.ok for i in run_checklist(prof, "other"))
    with pytest.raises(ProfileError, match="known ops"):
        run_checklist(prof, "missing")


def _env_without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_env_check_ok_when_pythonpath_points_inside_root(tiny_project, monkeypatch):
    p = tiny_project()
    prof = load_profile(p.write())
    monkeypatch.setenv("PYTHONPATH", str(p.root))
    item = env_check(prof)
    assert item.ok, item
    assert item.detail.startswith(str(p.root.resolve()))


def test_env_check_not_ok_when_not_importable(tiny_project, monkeypatch):
    p = tiny_project()
    prof = load_profile(p.write())
    monkeypatch.delenv("PYTHONPATH", raising=False)
    item = env_check(prof)  # the package sits in cwd, but cwd does not count (python -P)
    assert not item.ok
    assert "pip install -e . (no packaging here" in item.fix  # a plain directory of modules
    assert f"export PYTHONPATH={prof.root}" in item.fix
    on_path = replace(prof, install="export PYTHONPATH=$PWD")  # what new-op writes there
    assert env_check(on_path).fix == f"cd {prof.root} && export PYTHONPATH=$PWD"
    (p.root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert env_check(prof).fix.endswith("pip install -e .")


def test_env_check_not_ok_when_imported_from_elsewhere(tiny_project, tmp_path, monkeypatch):
    p = tiny_project()
    elsewhere = tmp_path / "site"
    (elsewhere / p.pkg).mkdir(parents=True)
    (elsewhere / p.pkg / "__init__.py").write_text("")
    p.data["install"] = "pip install -e . --no-deps"
    prof = load_profile(p.write())
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    item = env_check(prof)
    assert not item.ok
    assert str(elsewhere) in item.detail
    assert "pip install -e . --no-deps" in item.fix


def test_git_check(tmp_path):
    assert not git_check(tmp_path).ok
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub").mkdir()
    assert git_check(tmp_path / "sub").ok


def test_env_check_probe_ignores_cwd(tiny_project):
    """Sanity of the premise: plain `python -c` from the root would import the package."""
    p = tiny_project()
    code = textwrap.dedent(f"import {p.pkg}")
    proc = subprocess.run([sys.executable, "-c", code], cwd=p.root, env=_env_without_pythonpath())
    assert proc.returncode == 0


def test_device_check_refuses_real_shapes_without_a_gpu(tiny_project):
    p = tiny_project()
    prof = load_profile(p.write())
    item = device_check(prof, "gemm_bf16", cuda=False)  # dense: 128^3 and 4096^3
    assert not item.ok
    assert "2 target shapes" in item.detail and "6.9e+10" in item.detail
    assert "CUDA machine" in item.fix and "ratchet init --op gemm_bf16 --rehearse" in item.fix
    assert device_check(prof, "gemm_bf16", cuda=True).ok
    # `ratchet check` judges the description: there the machine is a warning
    warned = device_check(prof, "gemm_bf16", cuda=False, warn=True)
    assert warned.ok and warned.warning and "--rehearse" in warned.detail
    # a campaign's own small shapes (`ratchet init --shapes`) are what init judges
    small = 'inline:[{"label": "s", "M": 64, "N": 64, "K": 64}]'
    assert device_check(prof, "gemm_bf16", cuda=False, shapes_spec=small).ok


def test_the_small_shapes_a_refusal_suggests_are_ones_init_reads(tiny_project):
    """The `--shapes` example loads: a bundled op's setting (a grouped GEMM's token
    distribution) is not written as a size, and no K or B is added that the shape lacks."""
    from kernel_ratchet.harness.adapter import load_shapes

    p = tiny_project()
    (p.root / p.pkg / "grouped.py").write_text(
        "from kernel_ratchet.harness.adapter import Shape\n"
        "big = [Shape('g', 4096, 4096, 4096, 8, {'dist': 'skewed'})]\n"
        "rows = [Shape('r', 65536, 65536)]\n"  # over the CPU's work, no K
    )
    for shapes, kept in (("big", {"K", "B", "params"}), ("rows", set())):
        p.op["shapes"] = f"{p.pkg}.grouped:{shapes}"
        fix = device_check(load_profile(p.write()), "gemm_bf16", cuda=False).fix
        spec = fix.split("--shapes '")[1].split("'")[0]
        assert set(json.loads(spec.removeprefix("inline:"))[0]) == {"label", "M", "N", *kept}
        (small,) = load_shapes(spec)
        assert max(small.M, small.N, small.K) < 64 and small.B <= 4
    assert small.params == {} and (small.K, small.B) == (0, 1)


def test_a_shape_of_no_elements_is_refused_with_its_sizes_named(tiny_project):
    prof = load_profile(tiny_project().write())
    assert work_check(prof, "gemm_bf16").ok
    memory = 'inline:[{"label": "rows", "M": 64, "N": 64}]'  # K 0: a memory-bound op's
    assert work_check(prof, "gemm_bf16", shapes_spec=memory).ok
    empty = 'inline:[{"label": "z", "M": 0, "N": 64}, {"label": "ok", "M": 2, "N": 2}]'
    item = work_check(prof, "gemm_bf16", shapes_spec=empty)
    assert not item.ok and item.detail.startswith("z (M = 0)") and "at least 1" in item.fix


def test_device_check_lets_tiny_shapes_run_on_the_cpu(tiny_project):
    p = tiny_project()
    (p.root / p.pkg / "small.py").write_text(
        "from kernel_ratchet.harness.adapter import Shape\n"
        "tiny = [Shape('m64', 64, 64, 64), Shape('g', 32, 32, 32, 4)]\n"
    )
    p.op["shapes"] = f"{p.pkg}.small:tiny"
    item = device_check(load_profile(p.write()), "gemm_bf16", cuda=False)
    assert item.ok and "fits the CPU" in item.detail, item


def test_the_test_item_says_where_a_round_runs_the_focused_test(tiny_project):
    p = tiny_project()
    item = _by_name(run_checklist(load_profile(p.write())))["focused test command given"]
    assert item.ok and "runs it first" in item.detail and ".test_gpu: false runs it" in item.detail
    p.op["test_gpu"] = False
    item = _by_name(run_checklist(load_profile(p.write())))["focused test command given"]
    assert (
        item.ok
        and "with no GPU visible, beside the harness and the A/B" in item.detail
        and "runs it first" in item.detail
    )


def test_a_memory_bound_op_has_a_smaller_cpu_budget(tiny_project):
    """The interpreter walks an element-wise kernel far slower than it multiplies: 256^3 fits
    a GEMM's budget, not a memory-bound op's."""
    p = tiny_project()
    (p.root / p.pkg / "mid.py").write_text(
        "from kernel_ratchet.harness.adapter import Shape\nmid = [Shape('m256', 256, 256, 256)]\n"
    )
    p.op["shapes"] = f"{p.pkg}.mid:mid"
    assert device_check(load_profile(p.write()), "gemm_bf16", cuda=False).ok
    p.op["campaign_type"] = "memory"
    item = device_check(load_profile(p.write()), "gemm_bf16", cuda=False)
    assert not item.ok and "2e+06" in item.detail and "inline:" in item.fix, item


def test_an_adapter_without_training_roles_is_told_its_transfer_check_cannot_run(tiny_project):
    p = tiny_project()
    items = {i.name: i for i in run_checklist(load_profile(p.write()))}
    roles = items["gemm_bf16: training roles"]
    assert roles.ok and roles.warning and "NOT-RUN" in roles.detail
    q = tiny_project(name="with_roles")  # another package: the first one stays imported
    adapter = q.root / q.pkg / "adapter.py"
    adapter.write_text(
        adapter.read_text() + "\n    def training_roles(self, case):\n        return {}\n"
    )
    items = {i.name for i in run_checklist(load_profile(q.write()))}
    assert "gemm_bf16: training roles" not in items


def test_a_package_failing_in_its_own_code_is_told_apart_from_a_missing_one(
    tiny_project, monkeypatch
):
    p = tiny_project()
    prof = load_profile(p.write())
    monkeypatch.setenv("PYTHONPATH", str(p.root))
    init = p.root / p.pkg / "__init__.py"
    init.write_text(
        "raise RuntimeError('No device were detected.\\nCheck that your driver is complete.')\n"
    )
    item = env_check(prof)
    assert not item.ok
    assert "No device were detected. Check that your driver is complete." in item.detail
    assert "its own code fails at import" in item.fix and "__init__.py:1" in item.fix
    init.write_text("import kr_surely_not_installed_dep\n")
    item = env_check(prof)
    assert "needs kr_surely_not_installed_dep, which is not installed" in item.fix
    init.write_text("")
    monkeypatch.delenv("PYTHONPATH")
    assert env_check(prof).fix.startswith(f"cd {prof.root} && pip install -e .")


def test_user_code_sees_no_ratchet_arguments_and_cannot_end_the_check(tiny_project, monkeypatch):
    """A package that parses sys.argv at import (a dispatcher's --ops) would read ratchet's
    --op as its own; one that calls sys.exit at import would end ratchet."""
    p = tiny_project()
    adapter = p.root / p.pkg / "adapter.py"
    parses = (
        "import argparse\nap = argparse.ArgumentParser()\n"
        "ap.add_argument('--ops', choices=['mm'])\nap.parse_args()\n"
    )
    adapter.write_text(parses + adapter.read_text())
    monkeypatch.setattr(sys, "argv", ["ratchet", "check", "--op", "gemm_bf16"])
    items = _by_name(run_checklist(load_profile(p.write())))
    assert items["adapter importable"].ok, items["adapter importable"]
    assert sys.argv == ["ratchet", "check", "--op", "gemm_bf16"]  # given back
    (p.root / p.pkg / "exits.py").write_text("import sys\nsys.exit(4)\n")
    p.op["adapter"] = f"{p.pkg}.exits:X"
    item = _by_name(run_checklist(load_profile(p.write())))["adapter importable"]
    assert not item.ok and "sys.exit(4)" in item.detail and "exits.py:2" in item.detail


def test_an_adapter_op_whose_test_is_the_focused_call_is_called_by_check(tiny_project):
    """An op with an adapter class gets check's trial call where its focused test is that
    call (what new-op writes); with a test of its own, that test is left to the round."""
    from kernel_ratchet.profile.checklist import all_checks
    from kernel_ratchet.profile.described_check import WHAT

    p = tiny_project()
    calls = [i for i in all_checks(load_profile(p.write()), "gemm_bf16") if i.name.endswith(WHAT)]
    assert calls == []  # `pytest tests -q`: its own test
    p.op["test"] = "python -m kernel_ratchet.profile.focused gemm_bf16"
    (call,) = [i for i in all_checks(load_profile(p.write()), "gemm_bf16") if i.name.endswith(WHAT)]
    # the tiny project's adapter returns no output: a call that checked nothing fails
    assert not call.ok and "nothing was checked" in call.detail, call
