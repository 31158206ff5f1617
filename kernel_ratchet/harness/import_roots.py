"""Where a worker imports the op's package from: the copy it was started on, never another.

A worker is started on one copy of the project (the incumbent's worktree, or the candidate's
checkout), and the two sides of a paired A/B differ only by which copy they import. A project
whose package lives below its root (``src/mypkg``, ``python/mypkg``) and is installed editable
would otherwise import the editable install's copy on both sides: the A/B would compare the
candidate with itself. :func:`prefer` puts the copy's own import roots first on ``sys.path``;
:func:`refuse_other_copy` stops the worker when the op's module still came from elsewhere.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

from kernel_ratchet.errors import ProfileError

_DESCRIBED = "described:"
_SKIP = frozenset({".git", ".ratchet", "node_modules", "__pycache__", "build", "dist"})


def op_module(adapter: str) -> str:
    """The module the op's code is imported from: the adapter class's module, or a described
    op's function's module ("" when the spec names none)."""
    if adapter.startswith(_DESCRIBED):
        try:
            function = json.loads(adapter[len(_DESCRIBED) :]).get("function", "")
        except ValueError:
            return ""
        return str(function).split(":", 1)[0]
    return adapter.split(":", 1)[0] if ":" in adapter else ""


def reference_module(adapter: str) -> Any:
    """A described op's reference module, imported (its own import, before the function's);
    None for an adapter class, whose module holds the kernel's imports too."""
    from kernel_ratchet.harness.described_spec import description_of

    try:
        desc = description_of(adapter)
    except ValueError:  # the adapter's load names it
        return None
    module = desc.reference.split(":", 1)[0] if desc is not None else ""
    return importlib.import_module(module) if module else None


def roots(source_root: str, top: str) -> list[str]:
    """The directories of ``source_root`` (itself, or one level below it: ``src``,
    ``python``...) that hold the package ``top``."""
    base = Path(source_root)
    found = [base] if (base / top).is_dir() or (base / f"{top}.py").is_file() else []
    for sub in sorted(p for p in base.iterdir() if p.is_dir() and p.name not in _SKIP):
        if (sub / top / "__init__.py").is_file() or (sub / f"{top}.py").is_file():
            found.append(sub)
    return [str(p) for p in found]


def prefer(source_root: str, adapter: str) -> None:
    """Put ``source_root`` first on ``sys.path``, and ahead of it the directories below it that
    hold the op's top-level package (a src layout). When that package is already imported from
    elsewhere (the bundled kernel pack: ``kernel_ratchet`` itself), its not-yet-imported
    subpackages (``kernel_ratchet.kernels``) load from the copy, while the harness modules
    already imported stay the tool's own."""
    sys.path.insert(0, source_root)
    top = op_module(adapter).split(".", 1)[0]
    found = roots(source_root, top) if top else []
    for root in reversed(found):
        if root != source_root:
            sys.path.insert(0, root)
    pkg = sys.modules.get(top) if top else None
    for root in found:
        candidate = Path(root, top)
        if pkg is not None and (candidate / "__init__.py").is_file():
            paths = [str(Path(p).resolve()) for p in getattr(pkg, "__path__", [])]
            if str(candidate.resolve()) not in paths:
                pkg.__path__.insert(0, str(candidate))


def refuse_other_copy(source_root: str, adapter: str) -> None:
    """Raise ProfileError when the op's module was imported from outside ``source_root``
    although the copy holds that module (both sides of an A/B would run one copy)."""
    name = op_module(adapter)
    module = sys.modules.get(name)
    where = getattr(module, "__file__", None)
    rel = Path(*name.split(".")) if name else Path()
    copies = [
        f
        for r in (roots(source_root, name.split(".", 1)[0]) if name else [])
        for f in (Path(r) / rel.with_suffix(".py"), Path(r) / rel / "__init__.py")
        if f.is_file()
    ]
    if not where or not copies:  # the copy holds no such module (a workspace's kernel files)
        return
    root = Path(source_root).resolve()
    if root in Path(where).resolve().parents:
        return
    raise ProfileError(
        f"the op's module {name} was imported from {where}, not from the copy this worker "
        f"measures ({source_root}): both sides of a comparison would run the same code. "
        "Install the project editable from its own root (pip install -e .), and do not put "
        "an absolute path of one checkout on PYTHONPATH"
    )
