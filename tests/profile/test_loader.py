"""ratchet.yaml loading: valid profiles load; every problem names file, key and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.loader import find_profile, load_profile
from kernel_ratchet.profile.schema import BACKENDS, OP_KEYS, TOP_LEVEL_KEYS, OpProfile


def _problems(project, data=None) -> str:
    path = project.write(data)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    return str(info.value)


def _line_for(msg: str, key: str) -> str:
    lines = [ln for ln in msg.splitlines() if f": {key}: " in ln]
    assert lines, f"no problem line for {key!r} in:\n{msg}"
    return lines[0]


def test_valid_profile_loads_with_defaults(tiny_project):
    p = tiny_project()
    p.op["kernel_source"] = f"{p.pkg}/kernel.py"  # a single string becomes a tuple
    prof = load_profile(p.write())
    op = prof.op("gemm_bf16")
    assert prof.root == p.root.resolve()
    assert prof.path == (p.root / "ratchet.yaml").resolve()
    assert op.kernel_source == (f"{p.pkg}/kernel.py",)
    assert (op.execution_mode, op.rebuild, op.tunables) == ("repo", None, None)
    assert op.primary_metric == "Forward TFLOPS"
    assert op.schema_name == "gemm"
    assert prof.campaign_root_path == prof.root / ".ratchet" / "campaigns"
    assert prof.tips_root_path.is_absolute()


def test_backend_case_is_canonicalized(tiny_project):
    p = tiny_project()
    p.op["backend"] = "triton"
    assert load_profile(p.write()).op("gemm_bf16").backend == "TRITON"


def test_primary_metric_and_schema_by_campaign_type():
    def op(ct: str) -> OpProfile:
        return OpProfile("x", ("k.py",), "TRITON", "triton", ct, "t", "b", "m:A", "m:s")

    assert op("compute_fwd_bwd").primary_metric == "Combined Step TFLOPS"
    assert op("memory").primary_metric == "Forward GB/s"
    assert op("memory").schema_name == "memory"
    # a described memory op with gradients is decided on its step, as its rounds say
    described = 'described:{"function": "m:f", "gradients": ["x"]}'
    norm = OpProfile("x", ("k.py",), "TRITON", "triton", "memory", "t", "b", described, "m:s")
    assert norm.primary_metric == "Step GB/s"
    assert op("compute_fwd_bwd").schema_name == "gemm"


def test_unknown_op_lists_known_ones(tiny_project):
    prof = load_profile(tiny_project().write())
    with pytest.raises(ProfileError, match="known ops: gemm_bf16"):
        prof.op("nope")


def test_load_from_directory_walks_up(tiny_project):
    p = tiny_project()
    path = p.write()
    sub = p.root / p.pkg
    assert find_profile(sub) == path.resolve()
    assert load_profile(sub).path == path.resolve()


def test_find_profile_stops_at_git_root(tmp_path: Path):
    (tmp_path / "ratchet.yaml").write_text("project: outer\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    with pytest.raises(ProfileError) as info:
        find_profile(repo / "src")
    msg = str(info.value)
    assert "ratchet.yaml" in msg and str(repo) in msg and "Fix" in msg
    assert "`ratchet new-op NAME" in msg  # the command that writes one, not only a doc to read


def test_yaml_syntax_error_names_file_and_line(tiny_project):
    p = tiny_project()
    path = p.root / "ratchet.yaml"
    path.write_text("project: x\nops:\n  a: [1, 2\n  b: 3\n")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    msg = str(info.value)
    assert f"{path.resolve()}:" in msg and "YAML syntax error" in msg and "Fix" in msg
    assert any(f"ratchet.yaml:{n}:" in msg for n in (3, 4))


def test_duplicate_yaml_key_is_an_error(tiny_project):
    p = tiny_project()
    path = p.root / "ratchet.yaml"
    path.write_text("project: a\nproject: b\n")
    with pytest.raises(ProfileError, match="duplicate key 'project'"):
        load_profile(path)


def test_unknown_keys_list_the_allowed_ones(tiny_project):
    p = tiny_project()
    p.data["campain_root"] = "x"
    p.op["kernel_src"] = "x.py"
    msg = _problems(p)
    top = _line_for(msg, "campain_root")
    assert all(k in top for k in TOP_LEVEL_KEYS) and "Fix" in top
    op_line = _line_for(msg, "ops.gemm_bf16.kernel_src")
    assert all(k in op_line for k in OP_KEYS)
    assert str(p.root.resolve() / "ratchet.yaml") in op_line


def test_missing_required_keys_are_named(tiny_project):
    p = tiny_project()
    del p.data["install"]
    del p.op["test"]
    del p.op["benchmark"]  # optional: no problem line
    msg = _problems(p)
    assert "Fix: add 'install: ...'" in _line_for(msg, "install")
    assert "required key is missing" in _line_for(msg, "ops.gemm_bf16.test")
    assert "ops.gemm_bf16.benchmark" not in msg


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("campaign_type", "compute", "compute_fwd, compute_fwd_bwd, memory"),
        ("execution_mode", "sandbox", "repo, workspace"),
        ("backend", "METAL", ", ".join(BACKENDS)),
        ("kernel_source", [], "non-empty list"),
        ("kernel_source", "/abs/kernel.py", "absolute path"),
        ("kernel_source", "../outside.py", "leaves the project"),
        ("kernel_source", ["a.py", "./a.py"], "listed twice"),
        ("kernel_source", ["a.py", 3], "expected a file path"),
        ("test", 42, "non-empty string"),
        ("adapter", "pkg.adapter.GemmAdapter", "package.module:name"),
        ("rebuild", "", "non-empty string or null"),
        ("tunables", "../t.py", "leaves the project"),
    ],
)
def test_each_bad_op_value_names_file_key_and_fix(tiny_project, key, value, expect):
    p = tiny_project()
    p.op[key] = value
    msg = _problems(p)
    assert expect in msg
    assert f"ops.gemm_bf16.{key}" in msg
    assert str((p.root / "ratchet.yaml").resolve()) in msg
    assert "Fix:" in msg


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("campaign_root", "/tmp/campaigns", "absolute path"),
        ("tips_root", "../tips", "leaves the project"),
        ("campaign_root", ".", "project root itself"),
        ("package", "my-kernels", "not an importable name"),
        ("ops", {}, "non-empty mapping"),
        ("project", ["x"], "non-empty string"),
    ],
)
def test_each_bad_top_level_value_names_key_and_fix(tiny_project, key, value, expect):
    p = tiny_project()
    p.data[key] = value
    line = _line_for(_problems(p), key)
    assert expect in line and "Fix:" in line


def test_top_level_must_be_a_mapping(tiny_project):
    p = tiny_project()
    (p.root / "ratchet.yaml").write_text("- just\n- a list\n")
    with pytest.raises(ProfileError, match="expected a mapping"):
        load_profile(p.root / "ratchet.yaml")


def test_compiled_backend_in_repo_mode_needs_rebuild(tiny_project):
    p = tiny_project()
    p.op["backend"] = "CUDA"
    line = _line_for(_problems(p), "ops.gemm_bf16.rebuild")
    assert "rebuild" in line and "workspace" in line
    p.op["rebuild"] = "pip install -e . --no-build-isolation"
    assert load_profile(p.write()).op("gemm_bf16").rebuild.startswith("pip")
    del p.op["rebuild"]
    p.op["execution_mode"] = "workspace"
    assert load_profile(p.write()).op("gemm_bf16").execution_mode == "workspace"


def test_all_problems_are_reported_together(tiny_project):
    p = tiny_project()
    p.data["bogus"] = 1
    p.data["tips_root"] = "/abs"
    p.op["campaign_type"] = "fast"
    p.op["backend"] = "NOPE"
    del p.op["shapes"]
    msg = _problems(p)
    assert "5 problems" in msg.splitlines()[0]
    for key in (
        "bogus",
        "tips_root",
        "ops.gemm_bf16.campaign_type",
        "ops.gemm_bf16.backend",
        "ops.gemm_bf16.shapes",
    ):
        _line_for(msg, key)
    assert len([ln for ln in msg.splitlines() if ln.startswith("  - ")]) == 5


def test_the_consent_to_a_precision_drop_is_an_explicit_flag(tiny_project):
    p = tiny_project()
    assert load_profile(p.write()).op("gemm_bf16").allow_precision_drop is False
    p.op["allow_precision_drop"] = True
    assert load_profile(p.write()).op("gemm_bf16").allow_precision_drop is True
    p.op["allow_precision_drop"] = "yes please"
    assert "allow_precision_drop" in _line_for(_problems(p), "ops.gemm_bf16.allow_precision_drop")
