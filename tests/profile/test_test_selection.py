"""The check that a focused test's -k/-m selection keeps tests from every file it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.profile.checklist import run_checklist
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.test_selection import WHAT, missing_paths, named_paths, pytest_args


@pytest.mark.parametrize(
    "command, args",
    [
        ("pytest tests/a.py -k bf16", ["tests/a.py", "-k", "bf16"]),
        ("python -m pytest -q tests", ["-q", "tests"]),
        ("/usr/bin/python3.11 -m pytest x.py::t", ["x.py::t"]),
        ("TRITON_INTERPRET=1 pytest -m 'not gpu' t", ["-m", "not gpu", "t"]),
        ("make test", None),
        ("pytest a.py && pytest b.py", None),
        ("python -m kernel_ratchet.profile.focused rmsnorm", None),
        ("pytest 'unclosed", None),
    ],
)
def test_only_plain_pytest_calls_are_read(command, args):
    assert pytest_args(command) == args


def test_named_paths_skip_option_values(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "a.py").write_text("")
    (tmp_path / "old.py").write_text("")
    args = ["tests/a.py::test_x", "-k", "old.py", "--ignore", "old.py", "-q", "gone.py"]
    assert named_paths(args, tmp_path) == ["tests/a.py"]


def _project(tiny_project, tmp_path, test: str):
    """A project one level below pytest's rootdir, with two test files."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # node ids read proj/tests/...
    p = tiny_project()
    tests = p.root / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_a.py").write_text("def test_bf16_a():\n    pass\n")
    (tests / "test_b.py").write_text("def test_other():\n    pass\n")
    p.op["test"] = test
    return load_profile(p.write())


def _item(profile):
    found = [i for i in run_checklist(profile) if i.name.endswith(WHAT)]
    return found[0] if found else None


def test_a_file_the_selection_empties_fails_the_checklist(tiny_project, tmp_path):
    item = _item(_project(tiny_project, tmp_path, "pytest tests/test_a.py tests/test_b.py -k bf16"))
    assert not item.ok
    assert "no test of tests/test_b.py is selected" in item.detail
    assert "tests/test_a.py" not in item.detail.split("selected")[0]
    assert "widen the -k/-m selection" in item.fix


def test_a_selection_keeping_every_file_passes(tiny_project, tmp_path):
    cmd = "python -m pytest -q tests/test_a.py tests/test_b.py -k 'bf16 or other'"
    item = _item(_project(tiny_project, tmp_path, cmd))
    assert item.ok and not item.warning and item.detail == "2 tests from 2 path(s)"


def test_uncollectable_tests_are_a_note_not_a_failure(tiny_project, tmp_path):
    profile = _project(tiny_project, tmp_path, "pytest tests -k bf16")
    (profile.root / "tests" / "test_c.py").write_text("import no_such_module_here\n")
    item = _item(profile)
    assert item.ok and item.warning and "could not collect" in item.detail


def test_no_selection_collects_nothing(tiny_project, tmp_path):
    assert _item(_project(tiny_project, tmp_path, "pytest tests -q")) is None


def test_missing_paths_are_the_named_files_that_do_not_exist(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "a.py").write_text("")
    args = ["tests/a.py", "tests/typo.py::t", "-k", "gone.py", "--timeout", "60", "-q", "b.py"]
    assert missing_paths(args, tmp_path) == ["tests/typo.py", "b.py"]
    assert missing_paths(["--log-file", "logs/x.log", "tests/a.py"], tmp_path) == []
    assert missing_paths(["--pyargs", "mypkg.tests"], tmp_path) == []


def test_a_focused_test_naming_a_missing_file_fails_the_checklist(tiny_project, tmp_path):
    profile = _project(tiny_project, tmp_path, "python -m pytest tests/test_a.py tests/test_bb.py")
    found = [i for i in run_checklist(profile) if i.name.endswith("focused test's paths exist")]
    assert len(found) == 1 and not found[0].ok
    assert found[0].detail.startswith("tests/test_bb.py: named by")
    assert "correct the path" in found[0].fix


@pytest.mark.parametrize(
    "command, name, named",
    [
        ("python tests/run_typo.py --fast", "focused test's paths exist", "tests/run_typo.py"),
        ("FOO=1 bash scripts/check.sh", "focused test's paths exist", "scripts/check.sh"),
        ("./run_checks", "focused test's paths exist", "./run_checks"),
        ("python -m kernel_ratchet.profile.focused gemm_bf", "names a known op", "'gemm_bf'"),
    ],
)
def test_a_script_or_op_the_test_command_names_must_exist(
    tiny_project, tmp_path, command, name, named
):
    """Not only pytest's paths: a focused test that runs a script which is not there, or checks
    an op the profile does not describe, would fail the baseline; `ratchet check` says so."""
    found = [i for i in run_checklist(_project(tiny_project, tmp_path, command)) if not i.ok]
    assert len(found) == 1 and found[0].name.endswith(name), found
    assert named in found[0].detail and "the baseline would fail" in found[0].detail
    assert "ops.gemm_bf16.test" in found[0].fix


@pytest.mark.parametrize(
    "command",
    [
        "python tests/test_a.py",
        "python -m kernel_ratchet.profile.focused gemm_bf16",
        "python -m kernel_ratchet.profile.focused other --profile ../other/ratchet.yaml",
        "python -c 'import sys'",
        "make test",
    ],
)
def test_a_test_command_whose_script_and_op_exist_passes(tiny_project, tmp_path, command):
    profile = _project(tiny_project, tmp_path, command)
    assert not [i for i in run_checklist(profile) if "focused test" in i.name and not i.ok]


def test_every_bundled_op_names_test_paths_that_exist():
    """The repository's own ratchet.yaml: a test file renamed or split without its ops' test
    commands fails ``ratchet check`` and every campaign's baseline of those ops."""
    root = Path(__file__).resolve().parents[2]
    profile = load_profile(root / "ratchet.yaml")
    missing = {
        name: missing_paths(pytest_args(op.test) or [], root)
        for name, op in profile.ops.items()
        if op.test
    }
    assert not {name: paths for name, paths in missing.items() if paths}
