"""Whether the project's package imports from this checkout, the way every ratchet process
will import it: in a subprocess, the working directory not on the path, so only an editable
install or PYTHONPATH counts; and, when it does not, whether the package is missing or its own
code fails at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.on_path import own_code_fix, packaged
from kernel_ratchet.profile.schema import Profile

SUBPROCESS_TIMEOUT_S = 120


def _is_inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


_PROBE = """import json, sys, traceback
try:
    import {package} as m
except BaseException as e:
    tb = traceback.extract_tb(e.__traceback__)
    print(json.dumps({{
        "error": " ".join(f"{{type(e).__name__}}: {{e}}".split())[:400],
        "missing": getattr(e, "name", None) if isinstance(e, ImportError) else None,
        "where": f"{{tb[-1].filename}}:{{tb[-1].lineno}}" if tb else "",
    }}))
    sys.exit(1)
print(json.dumps({{"file": getattr(m, "__file__", None) or list(getattr(m, "__path__", []))[0]}}))
"""


def _import_probe(package: str) -> list[str]:
    """Command printing, as a JSON line, where ``package`` imports from or why it does not
    (the whole exception, where it was raised, the module a ModuleNotFoundError misses),
    without the cwd on sys.path."""
    code = _PROBE.format(package=package)
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-c", code]
    # Python 3.10 has no -P: drop the implicit cwd entry by hand (PYTHONPATH still counts).
    return [sys.executable, "-c", "import sys; sys.path[:] = sys.path[1:]\n" + code]


def _probed(stdout: str) -> dict:
    """The probe's JSON line ({} when it printed none: a crash)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict):
            return got
    return {}


def env_check(profile: Profile) -> CheckItem:
    """Whether ``profile.package`` imports from this checkout (an editable install).

    Runs the import in a subprocess with cwd = the project root and the cwd itself *not* on
    sys.path (``python -P``), so only an install or PYTHONPATH counts. When the package is not
    found (or found elsewhere), ``fix`` is the profile's ``install`` command; when its own code
    fails at import, the fix points there.
    """
    name = f"package {profile.package} imports from this checkout"
    fix = f"cd {profile.root} && {profile.install}"
    if not packaged(profile.root) and "pip install" in profile.install:
        fix += f" (no packaging here: put the root on the path, export PYTHONPATH={profile.root})"
    try:
        proc = subprocess.run(
            _import_probe(profile.package),
            cwd=profile.root,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT_S,
            env=dict(os.environ),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CheckItem(name, False, f"import probe failed: {exc}", fix)
    got = _probed(proc.stdout)
    if proc.returncode != 0 or "file" not in got:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        error = got.get("error") or last
        detail = f"import {profile.package} failed: {error}"
        return CheckItem(name, False, detail, _failure_fix(profile.package, got) or fix)
    where = str(got["file"] or "")
    if where and _is_inside(Path(where), profile.root):
        return CheckItem(name, True, where)
    return CheckItem(name, False, f"imports from {where or '?'}, outside {profile.root}", fix)


def _failure_fix(package: str, got: dict) -> str | None:
    """What to do when ``package`` is found but fails at import (None: it is not found, and
    installing the project is the fix)."""
    missing = got.get("missing")
    if not got.get("error") or (missing or "").split(".")[0] == package.split(".")[0]:
        return None
    if missing:
        return f"{package} is found but needs {missing}, which is not installed: install it"
    where = got.get("where") or "?"
    return own_code_fix(f"{package} is found but its own code fails at import", where)
