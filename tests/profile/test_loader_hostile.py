"""Hostile ratchet.yaml files: wrong encodings, kernel files that escape the project or point
into .git, and unbounded input all get one short ProfileError that says what to do."""

from __future__ import annotations

import os

import pytest

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.loader import load_profile
from tests.cpu_time import best_cpu_seconds
from tests.profile.conftest import dump_yaml


def _problems(project, data=None) -> str:
    path = project.write(data)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    return str(info.value)


def test_non_utf8_profile_is_a_profile_error(tiny_project):
    p = tiny_project()
    path = p.write()
    path.write_bytes(path.read_bytes().replace(b"project: tiny", b"project: caf\xe9"))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    msg = str(info.value)
    assert str(path) in msg and "UTF-8" in msg and "Fix" in msg
    assert "0xe9" in msg


def test_binary_profile_is_a_profile_error(tiny_project):
    path = tiny_project().write()
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ProfileError, match="UTF-8"):
        load_profile(path)


def test_control_character_in_profile_is_a_profile_error(tiny_project):
    path = tiny_project().write()
    path.write_text("project: a\x00b\n")
    with pytest.raises(ProfileError, match="Fix"):
        load_profile(path)


@pytest.mark.parametrize(
    "entry",
    [".git/config", "./.git/config", ".git", "sub/.git/HEAD", ".GIT/config", "a/../.git/config"],
)
def test_kernel_source_inside_git_dir_is_refused(tiny_project, entry):
    p = tiny_project()
    p.op["kernel_source"] = [entry]
    msg = _problems(p)
    assert "ops.gemm_bf16.kernel_source[0]" in msg
    assert ".git" in msg and "Fix" in msg


@pytest.mark.parametrize(
    ("entry", "expect"),
    [
        ("/etc/passwd", "absolute path"),
        ("../outside.py", "leaves the project"),
        ("a/../../outside.py", "leaves the project"),
    ],
)
def test_kernel_source_absolute_or_escaping_is_refused(tiny_project, entry, expect):
    p = tiny_project()
    p.op["kernel_source"] = [entry]
    assert expect in _problems(p)


def test_kernel_source_symlink_to_a_file_outside_is_refused(tiny_project, tmp_path):
    p = tiny_project()
    outside = tmp_path / "elsewhere.py"
    outside.write_text("# not the project's\n")
    (p.root / p.pkg / "link.py").symlink_to(outside)
    p.op["kernel_source"] = [f"{p.pkg}/link.py"]
    msg = _problems(p)
    assert "ops.gemm_bf16.kernel_source[0]" in msg
    assert "symlink" in msg and "outside the project" in msg and str(outside) in msg


def test_kernel_source_under_a_symlinked_directory_outside_is_refused(tiny_project, tmp_path):
    p = tiny_project()
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "k.py").write_text("# k\n")
    (p.root / "vendored").symlink_to(tmp_path / "ext", target_is_directory=True)
    p.op["kernel_source"] = ["vendored/k.py"]
    assert "outside the project" in _problems(p)


def test_kernel_source_symlink_into_git_dir_is_refused(tiny_project):
    p = tiny_project()
    (p.root / ".git").mkdir()
    (p.root / ".git" / "config").write_text("[core]\n")
    (p.root / p.pkg / "k.py").symlink_to(p.root / ".git" / "config")
    p.op["kernel_source"] = [f"{p.pkg}/k.py"]
    assert ".git" in _problems(p)


def test_kernel_source_symlink_inside_the_project_is_allowed(tiny_project):
    p = tiny_project()
    (p.root / p.pkg / "alias.py").symlink_to(p.root / p.pkg / "kernel.py")
    p.op["kernel_source"] = [f"{p.pkg}/alias.py"]
    assert load_profile(p.write()).op("gemm_bf16").kernel_source == (f"{p.pkg}/alias.py",)


def test_project_root_reached_through_a_symlink_still_loads(tiny_project, tmp_path):
    p = tiny_project()
    p.write()
    alias = tmp_path / "alias"
    alias.symlink_to(p.root, target_is_directory=True)
    prof = load_profile(alias / "ratchet.yaml")
    assert prof.op("gemm_bf16").kernel_source == (f"{p.pkg}/kernel.py",)


def _many_unknown_keys(p, n: int):
    data = dict(p.data)
    data.update({f"junk_{i}": i for i in range(n)})
    return data


def test_many_unknown_keys_give_a_short_message(tiny_project):
    p = tiny_project()
    msg = _problems(p, _many_unknown_keys(p, 5_000))
    assert len(msg) < 10_000, f"message is {len(msg)} characters"
    assert "junk_0" in msg and "and 4990 more unknown keys" in msg
    assert "5000 problems" in msg


def test_many_unknown_op_keys_are_capped_per_mapping(tiny_project):
    p = tiny_project()
    p.op.update({f"extra_{i}": i for i in range(300)})
    msg = _problems(p)
    assert "ops.gemm_bf16.extra_0" in msg and "and 290 more unknown keys" in msg
    assert len(msg.splitlines()) < 40


def test_many_bad_ops_are_capped_in_total(tiny_project):
    p = tiny_project()
    p.data["ops"] = {f"op{i}": {} for i in range(2_000)}
    msg = _problems(p)
    assert len(msg.splitlines()) < 60 and "more problems" in msg


@pytest.mark.slow
def test_huge_values_are_shortened_in_messages(tiny_project):
    p = tiny_project()
    p.data["ops"] = list(range(100_000))
    msg = _problems(p)
    assert "expected a non-empty mapping of ops" in msg and len(msg) < 2_000


def test_unknown_key_check_is_linear(tiny_project):
    p = tiny_project()
    small_path, large_path = p.root / "s.yaml", p.root / "l.yaml"
    small_path.write_text(dump_yaml(_many_unknown_keys(p, 2_000)))
    large_path.write_text(dump_yaml(_many_unknown_keys(p, 8_000)))

    def seconds(path) -> float:
        def load() -> None:
            with pytest.raises(ProfileError):
                load_profile(path)

        return best_cpu_seconds(load)

    seconds(small_path)
    ratio = seconds(large_path) / max(seconds(small_path), 1e-6)
    # linear: 4x; quadratic: 16x. 6.1x was measured once on a loaded 2-core machine.
    assert ratio < 9.0, f"4x the keys took {ratio:.1f}x the time"


def test_symlink_check_leaves_a_missing_kernel_file_to_the_checklist(tiny_project):
    p = tiny_project()
    os.remove(p.root / p.pkg / "kernel.py")
    assert load_profile(p.write()).op("gemm_bf16").kernel_source == (f"{p.pkg}/kernel.py",)


def test_a_misspelt_key_gets_the_nearest_allowed_one(tiny_project):
    p = tiny_project()
    p.op["kernel_sources"] = p.op.pop("kernel_source")
    p.op["zzz_qqq"] = 1
    msg = _problems(p)
    assert "kernel_sources: unknown key. Fix: did you mean 'kernel_source'?" in msg
    assert "zzz_qqq: unknown key. Fix: remove or rename it" in msg  # nothing near: no guess
