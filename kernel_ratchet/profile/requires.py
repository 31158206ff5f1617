"""What a project needs of the machine (``requires:`` in ``ratchet.yaml``), and whether this
machine has it.

``requires: {platform: rocm, packages: [primus_turbo]}`` says that the project's ops run only
on a ROCm build of torch (an AMD GPU) with those packages importable. :func:`parse_requires`
validates the key for the loader; :func:`unmet` says in one line what this machine lacks;
:func:`ensure_runnable` refuses to start a campaign here (``init``, ``run``, ``baseline``).
A profile without the key needs nothing beyond what its checklist checks.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.profile.problems import Problems, show

#: The ``platform`` values: the torch build a project's kernels need, and how it shows.
PLATFORMS: Mapping[str, tuple[str, str]] = {
    "rocm": ("ROCm", "hip"),
    "cuda": ("CUDA", "cuda"),
}
REQUIRES_KEYS: tuple[str, ...] = ("platform", "packages")
_PACKAGE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Requirements:
    """The machine a profile's ops need: a torch platform (None: any) and importable packages."""

    platform: str | None = None
    packages: tuple[str, ...] = ()


def parse_requires(raw: Any, problems: Problems) -> Requirements | None:
    """The ``requires`` value as Requirements, or None with every problem recorded."""
    fix = "write requires: {platform: rocm|cuda, packages: [import_name, ...]}"
    if not isinstance(raw, Mapping) or not raw:
        problems.add("requires", f"expected a mapping, got {show(raw)}", fix)
        return None
    n_before = problems.count
    for key in raw:
        if key not in REQUIRES_KEYS:
            problems.add(f"requires.{key}", "unknown key", f"allowed: {', '.join(REQUIRES_KEYS)}")
    platform = raw.get("platform")
    if platform is not None and platform not in PLATFORMS:
        problems.add(
            "requires.platform",
            f"{show(platform)} is not a known platform",
            f"set it to one of {', '.join(PLATFORMS)} (or remove it: any platform)",
        )
    packages = raw.get("packages", [])
    if isinstance(packages, str):
        packages = [packages]
    if not isinstance(packages, list) or not all(
        isinstance(p, str) and _PACKAGE.match(p) for p in packages
    ):
        problems.add(
            "requires.packages",
            f"expected a list of import names, got {show(packages)}",
            "list the packages as they are imported, e.g. [primus_turbo]",
        )
    if problems.count > n_before:
        return None
    return Requirements(platform=platform, packages=tuple(packages))


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def unmet(req: Requirements | None) -> str | None:
    """One line saying what this machine lacks (``cannot run here: needs ROCm
    (torch.version.hip is None) and package primus_turbo``), or None when it has it all."""
    if req is None:
        return None
    needs = []
    if req.platform is not None:
        import torch

        name, attr = PLATFORMS[req.platform]
        if getattr(torch.version, attr, None) is None:
            needs.append(f"{name} (torch.version.{attr} is None)")
    missing = [p for p in req.packages if not _importable(p)]
    if missing:
        needs.append(f"package{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    return f"cannot run here: needs {' and '.join(needs)}" if needs else None


def ensure_runnable(req: Requirements | None, where: str) -> None:
    """Raise RatchetError (exit 2) when this machine lacks what the profile at ``where`` needs."""
    why = unmet(req)
    if why is not None:
        raise RatchetError(
            f"{where}: {why}. Fix: run on a machine that has it (the profile's requires: "
            "key says what), and check it there with `ratchet check`"
        )
