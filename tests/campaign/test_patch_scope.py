"""``ratchet check --op OP --patch FILE``: whether a prepared diff fits one round of the op,
told before ``ratchet init`` spends a baseline on it."""

from __future__ import annotations

import os

from kernel_ratchet.campaign.patch_scope import patch_paths, patch_scope
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import KERNEL, git, make_project, set_blocks
from tests.cli_inprocess import run_cli

GIT_DIFF = """\
diff --git a/pkg/k.py b/pkg/k.py
--- a/pkg/k.py
+++ b/pkg/k.py
@@ -1 +1 @@
-x = 1
+x = 2
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+y = 1
diff --git a/old.md b/old.md
deleted file mode 100644
--- a/old.md
+++ /dev/null
@@ -1 +0,0 @@
-z
"""


def test_the_files_of_a_git_diff_and_of_a_plain_one():
    assert patch_paths(GIT_DIFF) == ["old.md", "pkg/k.py", "tests/test_new.py"]
    plain = "--- k.py\t2026-01-01\n+++ k.py\t2026-01-02\n@@ -1 +1 @@\n-a\n+b\n"
    assert patch_paths(plain) == ["k.py"]


def _diff(root, *paths) -> str:
    return git(root, "diff", "--", *paths)


def test_a_kernel_only_patch_fits_and_one_with_a_test_is_named(tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    set_blocks(root, M=32)
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "test_extra.py").write_text("def test_x():\n    assert True\n")
    git(root, "add", "-N", "tests/test_extra.py")
    kernel_only = tmp_path / "kernel.patch"
    kernel_only.write_text(_diff(root, KERNEL))
    with_test = tmp_path / "with_test.patch"
    with_test.write_text(_diff(root, KERNEL, "tests/test_extra.py"))

    # the other checks pass here: the exit status is the patch's
    rc, text = run_cli(
        capsys, monkeypatch, "check", "--op", "tiny_gemm", "--patch", str(kernel_only)
    )
    assert rc == 0, text
    rc, text = run_cli(capsys, monkeypatch, "check", "--op", "tiny_gemm", "--patch", str(with_test))
    assert rc == 1, text

    profile = load_profile(root)
    fits = patch_scope(profile, "tiny_gemm", kernel_only)
    assert fits.ok and "1 kernel file(s)" in fits.detail
    named = patch_scope(profile, "tiny_gemm", with_test)
    assert not named.ok and "tests/test_extra.py" in named.detail and KERNEL not in named.detail
    assert "ratchet init" in named.fix


def test_a_patch_needs_its_op(tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    (tmp_path / "x.patch").write_text(GIT_DIFF)
    rc, text = run_cli(capsys, monkeypatch, "check", "--patch", str(tmp_path / "x.patch"))
    assert rc == 2 and "--patch needs --op" in " ".join(text.split()), text


def test_whether_git_applies_the_patch_to_the_kernel_as_committed(tmp_path):
    root = make_project(tmp_path / "p")
    set_blocks(root, M=32)
    patch = tmp_path / "m32.patch"
    patch.write_text(_diff(root, KERNEL))
    profile = load_profile(root)

    held = patch_scope(profile, "tiny_gemm", patch)  # the change still in the tree
    assert held.ok and "holds it already" in held.detail and f"-- {KERNEL}" in held.detail

    git(root, "checkout", "--", KERNEL)
    fits = patch_scope(profile, "tiny_gemm", patch)
    assert fits.ok and "holds it" not in fits.detail

    stale = tmp_path / "stale.patch"  # made against another kernel than the committed one
    stale.write_text(patch.read_text().replace("BLOCK_M = ", "BLOCK_Q = "))
    named = patch_scope(profile, "tiny_gemm", stale)
    assert not named.ok and "does not apply" in named.detail and "as committed" in named.fix
