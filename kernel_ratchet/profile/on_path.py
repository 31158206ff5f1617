"""The project root first on ``sys.path`` while ``ratchet check`` imports what the op names,
and whether the project can instead be installed editable."""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernel_ratchet.errors import ProfileError


@contextmanager
def project_on_path(root: Path) -> Iterator[None]:
    """Put ``root`` first on sys.path for the duration; restore sys.path exactly after.

    What the project runs at import sees the command line of a plain ``python -c`` (no
    argument), not ratchet's: a package that parses ``sys.argv`` at import (some dispatchers
    do) would take ratchet's ``--op`` for one of its own options. A ``sys.exit`` at import
    raises :class:`ProfileError` naming it, instead of ending ratchet."""
    saved, argv = list(sys.path), sys.argv
    sys.path.insert(0, str(root))
    sys.argv = [argv[0] if argv else ""]
    importlib.invalidate_caches()
    try:
        yield
    except SystemExit as exc:
        where = _innermost(exc)
        raise ProfileError(
            f"the project's code called sys.exit({exc.code!r}) while ratchet imported it"
            f"{f' ({where})' if where else ''}; code run at import must not end the process: "
            "move it under `if __name__ == '__main__':` or into a function"
        ) from None
    finally:
        sys.path[:] = saved
        sys.argv = argv


def _innermost(exc: BaseException) -> str:
    """``file:line`` of the frame that raised ``exc``."""
    tb = traceback.extract_tb(exc.__traceback__)
    return f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""


def raised_in_project(exc: BaseException, root: Path) -> str | None:
    """``file:line`` (relative to ``root``) of the innermost frame of the project at ``root``
    that ``exc`` went through: where the project's own code failed; None when it never ran."""
    top = Path(root).resolve()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        try:
            rel = Path(frame.filename).resolve().relative_to(top)
        except (ValueError, OSError):
            continue
        return f"{rel}:{frame.lineno}"
    return None


#: The files that make a project pip-installable (``pip install -e .``).
PACKAGING_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def packaged(root: Path) -> bool:
    """Whether the project at ``root`` has a packaging file: without one its package imports
    from the checkout only with ``root`` on the path, never by an editable install."""
    return any((root / f).exists() for f in PACKAGING_FILES)


def own_code_fix(what: str, where: str) -> str:
    """The fix of an import that fails in the project's own code at ``where`` (``file:line``),
    said as ``what``: not an install."""
    return (
        f"{what} ({where}): fix it there, or set what it needs at import (a variable, a device) "
        "in the environment ratchet runs in"
    )
