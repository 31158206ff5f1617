"""The incumbent's worktree sealed while a round runs: code of the round must not change it.

The candidate's code runs on the same machine, as the same user, while the incumbent's worker
imports and runs the worktree's code. A candidate that writes a module into that tree (a
package directory ``kernel/`` beside ``kernel.py`` wins Python's import, a ``.pth`` file, a
``.pyc`` with the source's timestamp) makes the incumbent slower and fakes a gain, in this
round and, left there, in the next. So :func:`seal` fingerprints the code files of a freshly
prepared tree (their size and a hash of their bytes: a size and a modification time can be
put back after a rewrite; the ``.pyc`` files compiled first, so the incumbent's own imports
write none), and :func:`broken` lists those changed, added or removed since. Files other
than code (an op's own cache of autotuned configs) are not sealed.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import os
import shutil
from pathlib import Path

#: What Python imports or loads code from.
CODE_SUFFIXES = (".py", ".pyc", ".pth", ".so", ".pyd")

_SEALS: dict[Path, dict[str, tuple[int, str]]] = {}


def _digest(path: str) -> tuple[int, str]:
    """(size, sha256 of the bytes) of a file; a symbolic link is judged by its target."""
    if os.path.islink(path):
        return 0, "link:" + os.readlink(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return os.path.getsize(path), h.hexdigest()


def fingerprint(root: Path) -> dict[str, tuple[int, str]]:
    """``{relative path: (size, sha256)}`` of the code files under ``root`` (no ``.git``)."""
    out: dict[str, tuple[int, str]] = {}
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            if name.endswith(CODE_SUFFIXES):
                path = os.path.join(base, name)
                with contextlib.suppress(OSError):
                    out[os.path.relpath(path, root)] = _digest(path)
    return out


def reset() -> None:
    """Forget every seal: a round starts (its first preparation of a tree seals it)."""
    _SEALS.clear()


def sealed(root: Path) -> bool:
    return Path(root).resolve() in _SEALS


def seal(root: Path) -> None:
    """Compile the tree's modules afresh (every ``__pycache__`` removed first: a compiled
    module planted with its source's time and size would be trusted) as an import would, so
    its later imports write nothing, and fingerprint its code files."""
    for base, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        if "__pycache__" in dirs:
            shutil.rmtree(os.path.join(base, "__pycache__"), ignore_errors=True)
            dirs.remove("__pycache__")
    with contextlib.suppress(Exception):  # a module that does not compile fails its import
        compileall.compile_dir(str(root), quiet=2, workers=1)
    _SEALS[Path(root).resolve()] = fingerprint(root)


def broken(root: Path) -> list[str]:
    """The code files of ``root`` changed, added or removed since :func:`seal` (each as
    ``path (what)``); [] when none or when it was not sealed in this process."""
    before = _SEALS.get(Path(root).resolve())
    if before is None:
        return []
    now = fingerprint(root)
    changes = [f"{p} (added)" for p in sorted(now.keys() - before.keys())]
    changes += [f"{p} (removed)" for p in sorted(before.keys() - now.keys())]
    changes += [f"{p} (changed)" for p in sorted(before.keys() & now.keys()) if before[p] != now[p]]
    return changes
