"""The project root first on ``sys.path`` while ``ratchet check`` imports what the op names."""

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
