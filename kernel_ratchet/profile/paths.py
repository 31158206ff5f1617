"""Where the paths of ``ratchet.yaml`` may point: inside the project, never into ``.git``.

A path is refused when it is absolute, escapes the project with ``..``, or (for the kernel
files a round may change) lies inside a ``.git`` directory or resolves, through symlinks,
outside the project or into its ``.git``. A round writes these files, so a kernel_source of
``.git/config`` or a symlink to a file elsewhere would let a round change what is no kernel.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from kernel_ratchet.profile.problems import Problems, show


def inside_project(value: str, dotted: str, problems: Problems, *, subdir: bool) -> str | None:
    """Normalized relative POSIX path inside the project, or None with a problem recorded."""
    if os.path.isabs(value) or PurePosixPath(value).is_absolute() or re.match(r"^[A-Za-z]:", value):
        problems.add(
            dotted, f"{show(value)} is an absolute path", "use a path relative to the root"
        )
        return None
    norm = os.path.normpath(value).replace(os.sep, "/")
    if norm == ".." or norm.startswith("../"):
        problems.add(dotted, f"{show(value)} leaves the project", "use a path inside the project")
        return None
    if subdir and norm == ".":
        problems.add(dotted, f"{show(value)} is the project root itself", "name a subdirectory")
        return None
    return norm


def _in_git_dir(rel: PurePosixPath) -> bool:
    """Whether a relative path has a ``.git`` component (any case: some filesystems fold it)."""
    return any(part.lower() == ".git" for part in rel.parts)


def kernel_file(value: str, root: Path, dotted: str, problems: Problems) -> str | None:
    """A kernel_source entry as a normalized path inside ``root`` (symlinks resolved and kept
    inside, no ``.git`` on either path), or None with a problem recorded. A file that does
    not exist passes here: the DEFINE_TARGET checklist reports it."""
    norm = inside_project(value, dotted, problems, subdir=True)
    if norm is None:
        return None
    fix = "name a kernel source file of the project (a real file, not git's own data)"
    if _in_git_dir(PurePosixPath(norm)):
        problems.add(dotted, f"{show(value)} is inside .git, git's own data", fix)
        return None
    real_root = root.resolve()
    real = (real_root / norm).resolve()
    try:
        rel = real.relative_to(real_root)
    except ValueError:
        problems.add(
            dotted,
            f"{show(value)} resolves through a symlink to {real}, outside the project",
            "name the real file inside the project (copy it in rather than linking to it)",
        )
        return None
    if _in_git_dir(PurePosixPath(rel.as_posix())):
        problems.add(dotted, f"{show(value)} resolves through a symlink into .git ({rel})", fix)
        return None
    return norm
