"""The project root first on ``sys.path`` while ``ratchet check`` imports what the op names,
and whether the project can instead be installed editable."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def project_on_path(root: Path) -> Iterator[None]:
    """Put ``root`` first on sys.path for the duration; restore sys.path exactly after."""
    saved = list(sys.path)
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path[:] = saved


#: The files that make a project pip-installable (``pip install -e .``).
PACKAGING_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def packaged(root: Path) -> bool:
    """Whether the project at ``root`` has a packaging file: without one its package imports
    from the checkout only with ``root`` on the path, never by an editable install."""
    return any((root / f).exists() for f in PACKAGING_FILES)
