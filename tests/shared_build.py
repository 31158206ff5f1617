"""Expensive fixtures built once for a whole test run, across pytest-xdist workers.

A session fixture is built once per worker process: with two workers, a baselined campaign
that costs half a minute in the Triton interpreter was built twice. :func:`built_once` builds a
directory once in the run's shared temporary root (the first worker to ask builds it while the
others wait on a file lock) and gives each caller its own copy, so tests stay free to change it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path


def _run_root(tmp_path_factory) -> Path:
    """The temporary root every worker of this run shares (the worker's own one without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Path]) -> Path:
    """A private copy of what ``build(dest)`` makes, run once per test run under ``name``.
    ``build`` returns the directory to copy (``dest`` or one inside it). A build that raised
    leaves no marker, so the next caller builds again and sees the same error."""
    root = _run_root(tmp_path_factory)
    template, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(template, ignore_errors=True)  # a build that failed half-way
            built = build(template)
            done.write_text(str(built.relative_to(template)))
    built = template / done.read_text()
    copy = tmp_path_factory.mktemp(name) / built.name
    shutil.copytree(built, copy, symlinks=True)
    _relink_worktrees(copy)
    return copy


def _relink_worktrees(copy: Path) -> None:
    """Point the copy's linked git worktrees (a campaign's incumbent) at the copy's own
    repository, both ways: a worktree's ``.git`` file names its repository by absolute path,
    so a copied one would still use the template's, and two copies' git commands would take one
    index lock. (``git worktree repair`` from the copy rewrites the template's side instead.)"""
    for dot_git in (p for p in copy.rglob(".git") if p.is_file()):
        named = Path(dot_git.read_text().split(":", 1)[1].strip())
        own = copy / ".git" / "worktrees" / named.name
        if own.is_dir():
            dot_git.write_text(f"gitdir: {own}\n")
            (own / "gitdir").write_text(f"{dot_git}\n")
