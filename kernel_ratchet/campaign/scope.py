"""Which changed files outside ``kernel_source`` a round's scope check ignores: an editor's
own state next to the files it edits (vim's ``.name.swp``/``.swo``/``.swx`` and its ``4913``
write probe, backups ``name~``, emacs' ``.#name`` locks and ``#name#`` autosaves). They are
not a change to the project; the round's record lists them as ignored."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

_EDITOR_FILE = re.compile(r"^(\..+\.sw[a-p]|.+~|\.#.+|#.+#|4913)$")


def is_editor_file(path: str) -> bool:
    """Whether ``path`` (relative, ``/``-separated) names an editor's swap, backup or lock."""
    return bool(_EDITOR_FILE.match(PurePosixPath(path).name))


def split_editor_files(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """``paths`` as (changes that count, editor files to ignore), each sorted."""
    paths = sorted(paths)
    return [p for p in paths if not is_editor_file(p)], [p for p in paths if is_editor_file(p)]
