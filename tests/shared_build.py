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
    return copy
