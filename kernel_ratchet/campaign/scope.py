"""Which changed files outside ``kernel_source`` a round's scope check ignores: files that no
import, test or harness reads, so they cannot change what a round measures.

* an editor's own state next to the files it edits: vim's ``.name.swp``/``.swo``/``.swx`` and
  its ``4913`` write probe, backups ``name~``, emacs' ``.#name`` locks and ``#name#``
  autosaves, JetBrains' safe-write ``name___jb_old___``/``___jb_tmp___``, ``patch``'s
  ``.orig``/``.rej``, ``.bak``;
* notes and output the user keeps beside the project: ``*.md``, ``*.rst``, ``*.txt``,
  ``*.log``, ``*.out`` (``nohup.out``, a run's saved output), notebooks and their checkpoints;
* IDE and OS state: ``.vscode/``, ``.idea/``, ``.ipynb_checkpoints/``, ``.hypothesis/``,
  ``.DS_Store``, ``Thumbs.db``.

Anything that code could read stays counted: source, configuration (``.json``, ``.yaml``,
``.toml``, ``.cfg``, ``.ini``), data (``.csv``, tensors), caches of compiled code. The
round's record lists what was ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

_EDITOR_FILE = re.compile(r"^(\..+\.sw[a-p]|.+~|\.#.+|#.+#|4913|.+___jb_(old|tmp)___)$")
_INERT_SUFFIXES = frozenset(
    {".md", ".rst", ".txt", ".log", ".out", ".orig", ".rej", ".bak", ".ipynb"}
)
_INERT_NAMES = frozenset({".DS_Store", "Thumbs.db", "nohup.out"})
_INERT_DIRS = frozenset({".vscode", ".idea", ".ipynb_checkpoints", ".hypothesis"})


def is_ignored(path: str) -> bool:
    """Whether ``path`` (relative, ``/``-separated) is a file no round can read (above)."""
    p = PurePosixPath(path)
    return bool(
        _EDITOR_FILE.match(p.name)
        or p.name in _INERT_NAMES
        or p.suffix.lower() in _INERT_SUFFIXES
        or _INERT_DIRS.intersection(p.parts[:-1])
    )


def split_ignored(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """``paths`` as (changes that count, files ignored), each sorted."""
    paths = sorted(paths)
    return [p for p in paths if not is_ignored(p)], [p for p in paths if is_ignored(p)]
