"""Workspace-mode (SPEC section 3): the campaign runs on an extracted minimal stack.

``ratchet init --mode workspace`` copies the op's kernel files, its focused test and its
benchmark into the campaign directory, which is git-excluded from the project::

    <campaign_dir>/src/<kernel_source paths>      the only files a round may change
    <campaign_dir>/src/<pkg>/__init__.py          generated overlays (see below)
    <campaign_dir>/tests/<test files>             the focused test (+ its conftest/__init__)
    <campaign_dir>/bench/<benchmark module/script>
    <campaign_dir>/workspace.json                 upstream commit, file hashes, commands

Rounds run there: the context's ``root`` is ``<campaign_dir>/src``, so the focused test, the
harness and every snapshot, scope check and rollback act on the workspace and never on the
project. Lineage inside the workspace is kept by the rounds' kernel snapshots (the incumbent is
the last accepted round's ``kernel_snapshot``), not by git: the manifest has
``git_commit: false`` and ``git_branch: none``, and the project's branch is not touched.

Imports: every package directory on the path of an extracted module gets an *overlay*
``__init__.py`` in ``src/``. It sets the package's ``__path__`` to ``[src/<pkg>, bench/<pkg>,
<project>/<pkg>]`` (relative to itself, so the project stays relocatable) and then runs the
project's own ``__init__.py``. An extracted module therefore shadows the project's copy and
every other module of the package (adapter, reference, shapes) is imported from the project.
The rewritten test and benchmark commands run in ``src/`` with ``src`` and the project root on
``PYTHONPATH``; the generated harness puts ``src`` first on ``sys.path`` itself.

Sync-back, the integration gate that brings the incumbent's kernel files into the project, is
:mod:`kernel_ratchet.campaign.sync_back`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text, file_sha256
from kernel_ratchet.errors import CampaignError

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.manifest import Manifest
    from kernel_ratchet.profile.schema import OpProfile, Profile

WORKSPACE = "workspace"
WORKSPACE_FILE = "workspace.json"
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_OUTPUTS = {".pyc", ".csv", ".log"}  # what running the test or benchmark in src/ leaves


def is_workspace(m: Manifest) -> bool:
    """Whether the campaign described by ``m`` runs in workspace-mode."""
    return m.execution_mode == WORKSPACE


def src_dir(cdir: Path) -> Path:
    """The workspace's source root: what rounds treat as the project root."""
    return Path(cdir) / "src"


def rounds_root(project_root: Path, cdir: Path, m: Manifest) -> Path:
    """The directory a campaign's rounds run in: the project root, or the workspace's src/."""
    return src_dir(cdir) if is_workspace(m) else project_root


# -- extraction --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Extraction:
    """What ``extract`` wrote: the commands rewritten to run in ``src/`` and the copied files."""

    test_command: str
    benchmark_command: str
    files: dict[str, str]  # workspace-relative path -> project-relative source path


def _copy(root: Path, cdir: Path, rel: str, dest_rel: str, files: dict[str, str]) -> None:
    dest = cdir / dest_rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / rel, dest)
    files[dest_rel] = rel


def _test_dest(rel: str) -> str:
    """``tests/a/test_x.py`` -> ``tests/a/test_x.py``; ``pkg/test_x.py`` -> ``tests/pkg/...``."""
    parts = Path(rel).parts
    return Path("tests", *(parts[1:] if parts[0] == "tests" else parts)).as_posix()


def _extract_test_path(root: Path, cdir: Path, rel: str, files: dict[str, str]) -> str:
    """Copy a test file or directory (with the conftest.py/__init__.py files above it)."""
    src = root / rel
    if src.is_dir():
        for p in sorted(src.rglob("*")):
            if p.is_file() and not _SKIP_DIRS & set(p.relative_to(root).parts):
                r = p.relative_to(root).as_posix()
                _copy(root, cdir, r, _test_dest(r), files)
    else:
        _copy(root, cdir, rel, _test_dest(rel), files)
    for parent in Path(rel).parents:
        if str(parent) == ".":
            break
        for helper in ("conftest.py", "__init__.py"):
            h = (parent / helper).as_posix()
            if (root / h).is_file() and _test_dest(h) not in files:
                _copy(root, cdir, h, _test_dest(h), files)
    return _test_dest(rel)


def _module_file(root: Path, module: str) -> str | None:
    base = Path(*module.split("."))
    for cand in (base.with_suffix(".py"), base / "__main__.py"):
        if (root / cand).is_file():
            return cand.as_posix()
    return None


def _project_file(root: Path, token: str) -> str | None:
    """``token`` as a path inside the project (``::node`` ids allowed), or None."""
    path = token.split("::")[0]
    if not path or os.path.isabs(path) or path.startswith("-"):
        return None
    norm = os.path.normpath(path)
    if norm.startswith("..") or not (root / norm).exists() or norm == ".":
        return None
    return Path(norm).as_posix()


def _env_prefix(cdir: Path, root: Path) -> str:
    to_root = os.path.relpath(root, src_dir(cdir))
    return f'PYTHONPATH="$PWD:$PWD/{to_root}${{PYTHONPATH:+:$PYTHONPATH}}" '


def _rewrite_test(root: Path, cdir: Path, command: str, files: dict[str, str]) -> str:
    out = []
    for tok in shlex.split(command):
        rel = _project_file(root, tok)
        if rel is None:
            out.append(tok)
            continue
        dest = _extract_test_path(root, cdir, rel, files)
        suffix = tok[len(tok.split("::")[0]) :]
        out.append(os.path.relpath(cdir / dest, src_dir(cdir)) + suffix)
    return _env_prefix(cdir, root) + shlex.join(out)


def _rewrite_bench(
    root: Path, cdir: Path, command: str, files: dict[str, str]
) -> tuple[str, list[str]]:
    """Copy the benchmark module or script into bench/; returns the command and module dirs."""
    toks, out, dirs = shlex.split(command), [], []
    for i, tok in enumerate(toks):
        if i > 0 and toks[i - 1] == "-m" and (mod := _module_file(root, tok)):
            _copy(root, cdir, mod, f"bench/{mod}", files)
            dirs.append(mod)
            out.append(tok)  # found through the overlay __path__ (src/, bench/, project)
        elif (rel := _project_file(root, tok)) and rel.endswith(".py"):
            _copy(root, cdir, rel, f"bench/{rel}", files)
            out.append(os.path.relpath(cdir / "bench" / rel, src_dir(cdir)))
        else:
            out.append(tok)
    return _env_prefix(cdir, root) + shlex.join(out), dirs


_OVERLAY = '''"""Workspace overlay of the project package {pkg!r} (generated by kernel-ratchet).

Modules extracted into the workspace (src/, then bench/) shadow the project's; every other
module of the package is imported from the project, whose __init__.py runs below.
"""

import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
_project = _os.path.normpath(_os.path.join(_here, {to_project!r}))
__path__ = [_here, _os.path.normpath(_os.path.join(_here, {to_bench!r})), _project]
_init = _os.path.join(_project, "__init__.py")
if _os.path.exists(_init):
    __file__ = _init
    with open(_init, encoding="utf-8") as _f:
        exec(compile(_f.read(), _init, "exec"))
'''


def _write_overlays(root: Path, cdir: Path, modules: list[str], files: dict[str, str]) -> None:
    src = src_dir(cdir)
    pkgs = sorted({p.as_posix() for m in modules for p in Path(m).parents if str(p) != "."})
    for pkg in pkgs:
        here = src / pkg
        text = _OVERLAY.format(
            pkg=pkg.replace("/", "."),
            to_project=os.path.relpath(root / pkg, here),
            to_bench=os.path.relpath(cdir / "bench" / pkg, here),
        )
        here.mkdir(parents=True, exist_ok=True)
        atomic_write_text(here / "__init__.py", text)
        files[f"src/{pkg}/__init__.py"] = f"(overlay of {pkg})"


def extract(profile: Profile, op: OpProfile, cdir: Path, upstream_commit: str) -> Extraction:
    """Copy the op's minimal stack into ``cdir`` and write ``workspace.json``.

    The kernel files are copied from the project's working tree (the caller has checked that
    they equal ``upstream_commit``). A kernel file that does not exist yet is recorded as absent
    (a round may create it in the workspace). Returns the rewritten commands. Raises
    CampaignError when a kernel path exists but is not a file.
    """
    root = profile.root
    files: dict[str, str] = {}
    kernel: dict[str, str | None] = {}
    for rel in op.kernel_source:
        if not (root / rel).is_file():
            if (root / rel).exists():
                raise CampaignError(f"kernel path {rel} in {root} is not a file; fix kernel_source")
            (cdir / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
            kernel[rel] = None
            continue
        _copy(root, cdir, rel, f"src/{rel}", files)
        kernel[rel] = file_sha256(root / rel)
    test = _rewrite_test(root, cdir, op.test, files)
    bench, bench_modules = (
        _rewrite_bench(root, cdir, op.benchmark, files) if op.benchmark else ("", [])
    )
    _write_overlays(root, cdir, [*op.kernel_source, *bench_modules], files)
    atomic_write_json(
        cdir / WORKSPACE_FILE,
        {
            "upstream_commit": upstream_commit,
            "extracted": now(),
            "project_root_from_campaign": os.path.relpath(root, cdir),
            "kernel_files": kernel,
            "files": files,
            "original_test_command": op.test,
            "original_benchmark_command": op.benchmark,
            "test_command": test,
            "benchmark_command": bench,
        },
    )
    return Extraction(test, bench, files)


def load_workspace(cdir: Path) -> dict[str, Any]:
    """``workspace.json`` of a workspace-mode campaign; raises CampaignError for another mode."""
    path = Path(cdir) / WORKSPACE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CampaignError(f"{path} is missing: this is not a workspace-mode campaign") from None


# -- rounds in the workspace -------------------------------------------------------------------
def workspace_ambient(c: CampaignContext) -> dict[str, str | None]:
    """Fingerprints of the workspace's files outside kernel_source (the scope guard's view):
    src/, tests/ and bench/, without caches and run outputs (.pyc, .csv, .log)."""
    kernel = {f"src/{k}" for k in c.m.kernel_source}
    out: dict[str, str | None] = {}
    for sub in ("src", "tests", "bench"):
        base = c.dir / sub
        if not base.is_dir():
            continue
        for p in base.rglob("*"):
            rel = p.relative_to(c.dir)
            if not p.is_file() or _SKIP_DIRS & set(rel.parts) or p.suffix in _OUTPUTS:
                continue
            if rel.as_posix() not in kernel:
                out[rel.as_posix()] = file_sha256(p)
    return out
