"""The function and the reference an op described in ``ratchet.yaml`` names, imported.

``package.module:callable`` (an attribute path after the colon: ``Class.method``); the error
says which part is missing and what the object has instead, never "install the project" when
the module itself imports.
"""

from __future__ import annotations

import importlib
from typing import Any

from kernel_ratchet.errors import ProfileError


def import_callable(spec: str) -> Any:
    """The object ``spec`` names; ProfileError saying what is missing."""
    module, attr = spec.split(":", 1)
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ProfileError(
            f"{spec} cannot be imported ({exc}); check function/reference in ratchet.yaml and "
            "that the project is importable (pip install -e . or PYTHONPATH)"
        ) from exc
    where = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(obj) if not n.startswith("_"))
            lack = f"{module} imports, but" if where == module else f"{where} of {module}"
            raise ProfileError(
                f"{spec}: {lack} has no {part!r} (it has "
                f"{', '.join(names[:12]) or 'nothing public'}); check the name after ':' in "
                "ratchet.yaml"
            )
        obj, where = getattr(obj, part), part
    return obj
