"""The incumbent's worktree sealed for a round (:mod:`.tree_seal` of the campaign's lineage)."""

from __future__ import annotations

import os
from pathlib import Path

from kernel_ratchet.campaign.lineage import tree_seal
from kernel_ratchet.campaign.lineage.worktree import _put


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "kernel.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "cache.json").write_text("{}\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.py").write_text("")
    return tmp_path


def test_a_sealed_tree_reports_code_files_added_changed_or_removed(tmp_path):
    root = _tree(tmp_path)
    tree_seal.reset()
    assert tree_seal.broken(root) == [] and not tree_seal.sealed(root)
    tree_seal.seal(root)
    assert tree_seal.sealed(root) and tree_seal.broken(root) == []
    cache = os.path.join("pkg", "__pycache__")
    assert any(p.startswith(cache) for p in tree_seal.fingerprint(root))
    (root / "pkg" / "cache.json").write_text('{"tuned": 1}\n')  # not code
    (root / ".git" / "hook.py").write_text("x = 1\n")  # git's, not the tree's
    assert tree_seal.broken(root) == []
    (root / "pkg" / "kernel").mkdir()
    (root / "pkg" / "kernel" / "__init__.py").write_text("SLOW = True\n")
    (root / "pkg" / "kernel.py").write_text("X = 2\n")
    assert tree_seal.broken(root) == [
        f"{os.path.join('pkg', 'kernel', '__init__.py')} (added)",
        f"{os.path.join('pkg', 'kernel.py')} (changed)",
    ]
    tree_seal.reset()
    assert tree_seal.broken(root) == []


def test_sealing_compiles_afresh_so_a_planted_compiled_module_goes(tmp_path):
    root = _tree(tmp_path)
    cache = root / "pkg" / "__pycache__"
    cache.mkdir()
    planted = cache / "planted.cpython-311.pyc"
    planted.write_bytes(b"not python")
    tree_seal.seal(root)
    assert not planted.exists() and any(cache.iterdir())  # kernel.py's, compiled by the seal


def test_put_keeps_a_file_that_already_holds_the_bytes(tmp_path):
    path = tmp_path / "a" / "k.py"
    _put(path, b"X = 1\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    _put(path, b"X = 1\n")
    assert path.stat().st_mtime_ns == 1_000_000_000  # its compiled module stays valid
    _put(path, b"X = 2\n")
    assert path.read_bytes() == b"X = 2\n"


def test_a_compiled_module_rewritten_with_its_size_and_time_put_back_is_seen(tmp_path):
    """The seal reads bytes: a forged ``.pyc`` of the sealed size, its modification time set
    back with ``os.utime``, is still a change."""
    root = _tree(tmp_path)
    tree_seal.reset()
    tree_seal.seal(root)
    pyc = next((root / "pkg" / "__pycache__").glob("kernel.*.pyc"))
    st = pyc.stat()
    data = bytearray(pyc.read_bytes())
    data[-1] ^= 0xFF  # same size, other code
    pyc.write_bytes(bytes(data))
    os.utime(pyc, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert pyc.stat().st_size == st.st_size and pyc.stat().st_mtime_ns == st.st_mtime_ns
    rel = os.path.relpath(pyc, root)
    assert tree_seal.broken(root) == [f"{rel} (changed)"]
