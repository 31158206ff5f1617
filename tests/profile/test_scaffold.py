"""`ratchet new-op`: the op's ratchet.yaml entry (appended, nothing else changed, nothing
overwritten) and a focused test that passes on the scaffolded op."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from kernel_ratchet import cli
from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX, Shape, load_adapter
from kernel_ratchet.profile.focused import run as focused
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.scaffold import parse_value

KERNEL = """\
import torch


def scale(x, w):
    return x * w


def scale_ref(x, w):
    return x * w


def scale_eps(x, w, k, eps=0.0):
    return x * w * k + eps


def scale_eps_ref(x, w, k=1.0, eps=0.0):
    return x * w * k + eps
"""

EXISTING = """\
# my project's profile; this comment must survive
project: p
package: mynorm
install: "pip install -e ."
full_test: "pytest"
campaign_root: .ratchet/campaigns
ops:
    first:   # the first op, four-space indented
        kernel_source: [mynorm.py]
        backend: TRITON
        lang: triton
        campaign_type: memory
        test: "pytest"
        function: mynorm:scale
        reference: mynorm:scale_ref
        inputs: {x: "[M, N] float32", w: "[N] float32"}
        outputs: [y]
        shapes: [{label: s, M: 8, N: 8}]

tips_root: tips   # a key after ops
"""

FLAGS = (
    "new-op",
    "scaled",
    "--function",
    "mynorm:scale",
    "--reference",
    "mynorm:scale_ref",
    "--input",
    "x=[M, N] dtype",
    "--input",
    "w=[N] float32",
    "--gradient",
    "x",
    "--shape",
    "wide:M=4096,N=1000,dtype=float32",
)


@pytest.fixture
def proj(module_project):
    return module_project("mynorm", KERNEL)


def ratchet(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["ratchet", *args])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    out = capsys.readouterr()
    return exc.value.code, out.out + out.err


def test_new_op_appends_to_ops_and_keeps_the_rest(proj, monkeypatch, capsys):
    (proj / "ratchet.yaml").write_text(EXISTING)
    code, out = ratchet(monkeypatch, capsys, *FLAGS)
    assert code == 0, out
    flat = " ".join(out.split())
    assert "next: commit ratchet.yaml and tests/test_scaled_focused.py" in flat, out
    text = (proj / "ratchet.yaml").read_text()
    assert text.startswith(EXISTING.split("\ntips_root")[0])  # nothing before changed
    assert text.rstrip().endswith("tips_root: tips   # a key after ops")
    assert "\n    scaled:\n        kernel_source:" in text  # the file's own indentation
    prof = load_profile(proj / "ratchet.yaml")
    assert list(prof.ops) == ["first", "scaled"] and prof.tips_root == "tips"
    assert prof.op("scaled").kernel_source == ("mynorm.py",)
    test_file = proj / "tests" / "test_scaled_focused.py"
    assert 'run("scaled"' in test_file.read_text()
    assert focused("scaled", proj) == 0  # what the scaffolded test asserts


def test_new_op_refuses_an_existing_op_and_leaves_the_file(proj, monkeypatch, capsys):
    (proj / "ratchet.yaml").write_text(EXISTING)
    flags = list(FLAGS)
    flags[1] = "first"
    code, out = ratchet(monkeypatch, capsys, *flags)
    assert code == 2 and "exists already" in out
    assert (proj / "ratchet.yaml").read_text() == EXISTING
    assert not (proj / "tests").exists()
    (proj / "tests").mkdir()  # the op's focused test exists too: the op is what is said
    (proj / "tests" / "test_first_focused.py").write_text("# the user's\n")
    code, out = ratchet(monkeypatch, capsys, *flags)
    assert code == 2 and "op 'first' exists already" in " ".join(out.split())
    assert (proj / "tests" / "test_first_focused.py").read_text() == "# the user's\n"


def test_an_invalid_entry_is_refused_by_the_loader_before_the_file_changes(
    proj, monkeypatch, capsys
):
    (proj / "ratchet.yaml").write_text(EXISTING)
    code, out = ratchet(monkeypatch, capsys, *FLAGS, "--campaign-type", "fastest")
    assert code == 3 and "campaign_type" in out
    assert (proj / "ratchet.yaml").read_text() == EXISTING
    assert [p.name for p in proj.iterdir() if p.name.startswith(".")] == []


def test_new_op_creates_a_ratchet_yaml_that_loads(proj, monkeypatch, capsys):
    code, out = ratchet(monkeypatch, capsys, *FLAGS, "--no-test-file")
    assert code == 0, out
    prof = load_profile(proj / "ratchet.yaml")
    assert prof.package == "mynorm" and list(prof.ops) == ["scaled"]
    assert prof.op("scaled").test == "python -m kernel_ratchet.profile.focused scaled"
    assert prof.full_test == prof.op("scaled").test  # no pytest suite: the op's own check
    assert not (proj / "tests").exists()


def test_a_new_ratchet_yaml_runs_the_whole_suite_at_acceptance(proj, monkeypatch, capsys):
    code, out = ratchet(monkeypatch, capsys, *FLAGS)
    assert code == 0, out
    assert load_profile(proj / "ratchet.yaml").full_test == "python -m pytest -q"
    # said, since the whole suite may be long or need a GPU
    assert "full_test: `python -m pytest -q`" in out and "narrow it" in " ".join(out.split())


@pytest.mark.parametrize("bad", ["--input=x", "--shape=wide", "--shape=:M=4"])
def test_malformed_flags_are_usage_errors(proj, monkeypatch, capsys, bad):
    code, out = ratchet(monkeypatch, capsys, *FLAGS, bad)
    assert code == 2 and "write it as" in out
    assert not (proj / "ratchet.yaml").exists()


CONSTANT_FLAGS = (
    "new-op",
    "scaled_eps",
    "--function",
    "mynorm:scale_eps",
    "--reference",
    "mynorm:scale_eps_ref",
    "--input",
    "x=[M, N] float32",
    "--input",
    "w=[N] float32",
    "--gradient",
    "x",
    "--arg",
    "3",
    "--kwarg",
    "eps=1e-6",
    "--reference-kwarg",
    "k=3",
    "--reference-kwarg",
    "eps=1e-6",
    "--role",
    "w=weight",
    "--measure",
    "quantity=kernel_time,l2=cold",
    "--shape",
    "s:M=8,N=16",
    "--no-test-file",
)


def test_constants_roles_and_the_measure_are_written_typed_and_used(proj, monkeypatch, capsys):
    code, out = ratchet(monkeypatch, capsys, *CONSTANT_FLAGS)
    assert code == 0, out
    op = yaml.safe_load((proj / "ratchet.yaml").read_text())["ops"]["scaled_eps"]
    assert op["args"] == [3] and op["kwargs"] == {"eps": 1e-6}
    assert op["reference_kwargs"] == {"k": 3, "eps": 1e-6} and op["roles"] == {"w": "weight"}
    prof = load_profile(proj / "ratchet.yaml").op("scaled_eps")
    assert (prof.measure.quantity, prof.measure.l2) == ("kernel_time", "cold")
    assert focused("scaled_eps", proj) == 0  # k and eps reach both sides: a missing one fails


def test_a_wrong_role_is_refused_by_the_loader(proj, monkeypatch, capsys):
    flags = [f if f != "w=weight" else "w=bias" for f in CONSTANT_FLAGS]
    code, out = ratchet(monkeypatch, capsys, *flags)
    assert code == 3 and "roles.w" in out
    assert not (proj / "ratchet.yaml").exists()


@pytest.mark.parametrize(
    "text, value",
    [
        ("3", 3),
        ("1e-6", 1e-6),
        ("-1", -1),
        ("true", True),
        ("null", None),
        ("[1, 2]", [1, 2]),
        ("{a: 1}", {"a": 1}),
        ("mean", "mean"),
        ("", ""),  # empty text stays text
    ],
)
def test_a_constant_on_the_command_line_gets_its_type(text, value):
    assert parse_value(text) == value


def test_new_op_twice_adds_siblings_to_the_file_it_wrote(proj, monkeypatch, capsys):
    """The second op goes beside the first (the file's two-space entries), not inside it."""
    code, out = ratchet(monkeypatch, capsys, *FLAGS, "--no-test-file")
    assert code == 0, out
    flags = list(FLAGS)
    flags[1] = "second"
    code, out = ratchet(monkeypatch, capsys, *flags, "--no-test-file")
    assert code == 0, out
    assert list(load_profile(proj / "ratchet.yaml").ops) == ["scaled", "second"]
    assert "\n  second:\n    kernel_source:" in (proj / "ratchet.yaml").read_text()


def test_a_refused_entry_names_the_users_file_not_the_trial(proj, monkeypatch, capsys):
    (proj / "ratchet.yaml").write_text(EXISTING)
    code, out = ratchet(monkeypatch, capsys, *FLAGS, "--campaign-type", "fastest")
    assert code == 3 and "op 'scaled' was not added (ratchet.yaml is unchanged)" in out
    assert ".ratchet.yaml.new" not in out


@pytest.mark.parametrize(
    ("shape", "missing"),
    [
        ("{label: s, M: 8}", "N (N by x, w)"),  # a core symbol: N would read 1
        ("{label: s, M: 8, N: 8}", "H (H by x)"),  # a symbol of the op's own
    ],
)
def test_a_shape_that_leaves_out_a_symbol_of_the_inputs_is_refused(tmp_path, shape, missing):
    text = EXISTING.replace(
        'x: "[M, N] float32"', 'x: "[M, N, H] float32"' if "H" in missing else 'x: "[M, N] float32"'
    )
    text = text.replace("shapes: [{label: s, M: 8, N: 8}]", f"shapes: [{shape}]")
    (tmp_path / "ratchet.yaml").write_text(text)
    with pytest.raises(ProfileError) as refused:
        load_profile(tmp_path / "ratchet.yaml")
    assert f"shape 's' does not give {missing}" in str(refused.value)


def test_check_calls_a_described_op_once_and_names_a_wrong_description(proj):
    from kernel_ratchet.profile.checklist import all_checks
    from kernel_ratchet.profile.described_check import WHAT

    def item(text: str):
        (proj / "ratchet.yaml").write_text(text)
        found = [i for i in all_checks(load_profile(proj / "ratchet.yaml"), "first")]
        return next(i for i in found if i.name.endswith(WHAT))

    # a warning the kernel's module prints to stderr is not the call's result
    kernel = proj / "mynorm.py"
    kernel.write_text(
        kernel.read_text() + "\nimport sys\nprint('FutureWarning: x', file=sys.stderr)\n"
    )
    good = item(EXISTING)
    assert good.ok and good.detail == "1 passed, 0 failed", good
    wrong = item(EXISTING.replace("outputs: [y]", "outputs: [y, z]"))
    assert not wrong.ok and "declares the outputs ['y', 'z']" in wrong.detail, wrong
    assert wrong.detail.count("declares the outputs") == 1, wrong.detail  # said once
    # `ratchet check --profile other.yaml` calls the op as that file describes it
    (proj / "ratchet.yaml").write_text(EXISTING)
    (proj / "other.yaml").write_text(EXISTING.replace("outputs: [y]", "outputs: [y, z]"))
    found = all_checks(load_profile(proj / "other.yaml"), "first")
    other = next(i for i in found if i.name.endswith(WHAT))
    assert not other.ok and "declares the outputs ['y', 'z']" in other.detail, other
    assert "the op's description in ratchet.yaml" in wrong.fix


def test_the_default_kernel_source_is_found_in_a_src_layout(tmp_path):
    from kernel_ratchet.profile.scaffold import module_file

    (tmp_path / "src" / "mynorm").mkdir(parents=True)
    (tmp_path / "src" / "mynorm" / "__init__.py").write_text("")
    (tmp_path / "src" / "mynorm" / "rmsnorm.py").write_text("def rms_norm(x): ...\n")
    assert module_file(tmp_path, "mynorm.rmsnorm:rms_norm") == "src/mynorm/rmsnorm.py"
    assert module_file(tmp_path, "mynorm:rms_norm") == "src/mynorm/__init__.py"
    assert module_file(tmp_path, "other.mod:f") == "other/mod.py"  # not found: the dotted path


def test_a_shape_with_a_misspelt_dtype_is_refused_when_the_profile_loads(tmp_path):
    text = EXISTING.replace("{label: s, M: 8, N: 8}", "{label: s, M: 8, N: 8, dtype: flaot16}")
    (tmp_path / "ratchet.yaml").write_text(text)
    with pytest.raises(ProfileError) as refused:
        load_profile(tmp_path / "ratchet.yaml")
    assert "ops.first.shapes: shape 's': unknown dtype 'flaot16'" in str(refused.value)
    assert "did you mean 'float16'? use one of float32" in str(refused.value)


def test_a_function_that_does_not_import_is_said_once(proj):
    from kernel_ratchet.profile.checklist import all_checks
    from kernel_ratchet.profile.described_check import WHAT

    (proj / "ratchet.yaml").write_text(EXISTING.replace("mynorm:scale\n", "mynorm:scael\n"))
    items = all_checks(load_profile(proj / "ratchet.yaml"), "first")
    failed = [i.name for i in items if not i.ok and not i.warning]
    assert "first: adapter importable" in failed
    assert not any(i.name.endswith(WHAT) for i in items)  # no 'correct the kernel' row


def _described(proj, monkeypatch, capsys, *flags: str) -> dict:
    """The description ``new-op`` wrote for ``flags`` (op ``scaled``)."""
    code, out = ratchet(monkeypatch, capsys, *flags, "--no-test-file")
    assert code == 0, out
    spec = load_profile(proj / "ratchet.yaml").op("scaled").adapter
    return json.loads(spec.removeprefix(DESCRIBED_PREFIX))


@pytest.mark.parametrize(("second", "output"), [("w", "y"), ("y", "out")])
def test_the_default_output_is_not_named_after_an_input(proj, monkeypatch, capsys, second, output):
    """An output named after an input would share its gradient's name (dy)."""
    flags = [f if f != "w=[N] float32" else f"{second}=[N] float32" for f in FLAGS]
    assert _described(proj, monkeypatch, capsys, *flags)["outputs"] == [output]


@pytest.mark.parametrize("kwarg", [False, True], ids=["args-only", "reference-kwarg"])
def test_a_reference_the_described_call_does_not_fit_is_refused_with_where_constants_go(
    proj, monkeypatch, capsys, kwarg
):
    """The op's args go to its function only; a reference that needs one is named, with the
    key that gives it its constants."""
    flags = [*FLAGS[:3], "mynorm:scale_eps", "--reference", "mynorm:scale_eps", *FLAGS[6:]]
    flags += ["--arg", "2.0", *(["--reference-kwarg", "k=2.0"] if kwarg else [])]
    spec = DESCRIBED_PREFIX + json.dumps(_described(proj, monkeypatch, capsys, *flags))
    adapter = load_adapter(spec)
    case = adapter.make_case(Shape(label="s", M=4, N=8, dtype="float32"), 0, "cpu")
    if kwarg:
        assert set(adapter.reference(case)) == {"y", "dx"}
    else:
        fits = r"reference\(x, w\): missing a required argument: 'k'.*reference_kwargs"
        with pytest.raises(TypeError, match=fits):
            adapter.reference(case)
