"""A worker imports the op's package from the copy it measures, src layouts included."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness import import_roots
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import Worker, WorkerSpec
from tests.harness.test_redteam import spec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm" / "tiny_gemm"
SHAPE = Shape("m24_n20_k16", M=24, N=20, K=16)


def _src_copy(root: Path, broken: bool) -> Path:
    pkg = root / "src" / "tiny_gemm"
    shutil.copytree(EXAMPLE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    if broken:  # this copy's kernel returns zeros
        kernel = pkg / "kernel.py"
        kernel.write_text(
            kernel.read_text() + "\n\ndef matmul_nt(a, b):\n    import torch\n\n"
            "    return torch.zeros(a.shape[0], b.shape[0])\n"
        )
    return root


def test_a_src_layout_copy_is_measured_and_not_the_installed_one(tmp_path, monkeypatch):
    """Another checkout's src/ first on the path (an editable install of the main tree): the
    worker started on the incumbent's copy must still run the incumbent's kernel."""
    ours = _src_copy(tmp_path / "incumbent", broken=False)
    other = _src_copy(tmp_path / "main", broken=True)
    monkeypatch.setenv("PYTHONPATH", str(other / "src"))
    base = spec("TinyGemm").__dict__
    copy = WorkerSpec(**{**base, "source_root": str(ours), "adapter": "tiny_gemm.adapter:TinyGemm"})
    with Worker(copy, tmp_path / "w.log") as w:
        r = w.check(SHAPE, 7)
        assert r.ok, f"{r.category}: {r.detail}"


def test_the_roots_of_a_package_below_the_project_root(tmp_path):
    (tmp_path / "python" / "mypkg").mkdir(parents=True)
    (tmp_path / "python" / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "docs").mkdir()
    assert import_roots.roots(str(tmp_path), "mypkg") == [str(tmp_path / "python")]
    assert import_roots.op_module('described:{"function": "mypkg.norm:rms", "x": 1}') == (
        "mypkg.norm"
    )
    assert import_roots.op_module("mypkg.adapter:Norm") == "mypkg.adapter"


def test_an_op_module_from_another_copy_is_refused(tmp_path, monkeypatch):
    (tmp_path / "src" / "mypkg").mkdir(parents=True)
    (tmp_path / "src" / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "mypkg" / "adapter.py").write_text("")
    elsewhere = types.ModuleType("mypkg.adapter")
    elsewhere.__file__ = "/elsewhere/src/mypkg/adapter.py"
    monkeypatch.setitem(sys.modules, "mypkg.adapter", elsewhere)
    with pytest.raises(ProfileError, match="both sides of a comparison would run the same"):
        import_roots.refuse_other_copy(str(tmp_path), "mypkg.adapter:Norm")
    elsewhere.__file__ = str(tmp_path / "src" / "mypkg" / "adapter.py")
    import_roots.refuse_other_copy(str(tmp_path), "mypkg.adapter:Norm")  # its own copy
    # a copy without the module (a workspace holds the kernel files only) is not judged
    (tmp_path / "src" / "mypkg" / "adapter.py").unlink()
    elsewhere.__file__ = "/elsewhere/src/mypkg/adapter.py"
    import_roots.refuse_other_copy(str(tmp_path), "mypkg.adapter:Norm")
