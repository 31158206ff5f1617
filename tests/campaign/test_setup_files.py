"""``ratchet init`` names the files describing the op (``ratchet.yaml``, the adapter's module)
that its starting commit does not hold, and says where to commit them."""

from __future__ import annotations

from kernel_ratchet.campaign.setup_files import uncommitted_setup
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.scaffold import module_file
from tests.campaign.conftest import git, make_project, ratchet


def test_init_names_an_uncommitted_profile_and_adapter(tmp_path):
    root = make_project(tmp_path / "proj")
    assert uncommitted_setup(load_profile(root), "tiny_gemm") == []  # both committed
    with open(root / "ratchet.yaml", "a") as f:
        f.write("# a local edit\n")
    (root / "tiny_gemm" / "adapter.py").rename(root / "tiny_gemm" / "adapter_new.py")
    git(root, "rm", "-q", "--cached", "tiny_gemm/adapter.py")
    (root / "tiny_gemm" / "adapter_new.py").rename(root / "tiny_gemm" / "adapter.py")
    assert uncommitted_setup(load_profile(root), "tiny_gemm") == [
        "ratchet.yaml",
        "tiny_gemm/adapter.py",
    ]
    r = ratchet(root, "init", "--op", "tiny_gemm", "--yes")
    flat = " ".join(r.stderr.split())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: ratchet.yaml, tiny_gemm/adapter.py are not committed" in flat, flat
    assert "after `ratchet accept`" in flat


def test_the_adapter_file_is_found_without_importing_it(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "mod.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    assert module_file(tmp_path, "pkg.mod:Op") == "pkg/mod.py"
    assert module_file(tmp_path, "pkg.sub:Op") == "pkg/sub/__init__.py"
    assert not (tmp_path / module_file(tmp_path, "installed.elsewhere:Op")).exists()
