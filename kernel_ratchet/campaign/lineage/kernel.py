"""The kernel files across the lineage: snapshots, the incumbent's bytes, rollback, scope.

The incumbent's kernel files come from the incumbent commit (``git_commit``) or from the
incumbent round's ``kernel_snapshot``; a rollback writes them over the working tree and touches
nothing else. The scope check compares fingerprints of the user's own uncommitted files outside
the kernel files (the workspace's own files in workspace-mode) with those at the last close.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.export import RECORD_SUFFIXES
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text, file_sha256
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.workspace import is_workspace, workspace_ambient
from kernel_ratchet.campaign.scope import split_ignored

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernel_ratchet.campaign.context import CampaignContext


def snapshot(c: CampaignContext, rdir: Path) -> None:
    """Copy the working-tree kernel files into ``rdir/kernel_snapshot`` (missing ones listed)."""
    snap = rdir / "kernel_snapshot"
    files = {}
    for rel in c.m.kernel_source:
        src = c.root / rel
        if src.exists():
            data = src.read_bytes()
            dest = snap / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            files[rel] = file_sha256(src)
        else:
            files[rel] = None
    atomic_write_json(snap / "SNAPSHOT.json", {"taken": now(), "files": files})


def snapshot_restore_command(c: CampaignContext, rdir: Path) -> str:
    """The shell command, run from the project root, that writes ``rdir/kernel_snapshot``'s
    kernel files back over the working tree."""
    meta = json.loads((rdir / "kernel_snapshot" / "SNAPSHOT.json").read_text())
    snap = os.path.relpath(rdir / "kernel_snapshot", c.root)
    return " && ".join(
        f"cp {shlex.quote(os.path.join(snap, rel))} {shlex.quote(rel)}"
        for rel, sha in meta["files"].items()
        if sha is not None
    )


def put_snapshot(c: CampaignContext, rdir: Path) -> None:
    """Write ``rdir/kernel_snapshot``'s kernel files over the working tree (a missing one
    removed); nothing else is touched."""
    snap = rdir / "kernel_snapshot"
    meta = json.loads((snap / "SNAPSHOT.json").read_text())
    for rel, sha in meta["files"].items():
        path = c.root / rel
        if sha is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes((snap / rel).read_bytes())


def incumbent_bytes(c: CampaignContext, rel: str) -> bytes | None:
    """A kernel file's content in the incumbent (commit, or the incumbent round's snapshot)."""
    if c.m.git_commit and c.state.incumbent_commit:
        return git.show(c.groot, c.state.incumbent_commit, os.path.relpath(c.root / rel, c.groot))
    snap = c.round_dir(c.state.incumbent_round or 1) / "kernel_snapshot"
    meta = json.loads((snap / "SNAPSHOT.json").read_text())
    return None if meta["files"].get(rel) is None else (snap / rel).read_bytes()


def restore_incumbent(c: CampaignContext) -> list[str]:
    """Write the incumbent's kernel files over the working tree; touch nothing else."""
    restored = []
    for rel in c.m.kernel_source:
        data, path = incumbent_bytes(c, rel), c.root / rel
        if data is None:
            if path.exists():
                path.unlink()
                restored.append(rel)
        elif not path.exists() or path.read_bytes() != data:
            atomic_write_text(path, data.decode("utf-8"))
            restored.append(rel)
    return restored


def changed_kernel_files(c: CampaignContext) -> list[str]:
    """The kernel files whose working-tree bytes differ from the incumbent's."""
    return _differing(c, lambda rel: incumbent_bytes(c, rel))


def edited_since_start(c: CampaignContext) -> list[str]:
    """The kernel files whose working-tree bytes differ from the starting commit's (empty in a
    workspace, whose kernel files are its own copies, or without a starting commit)."""
    start = c.m.starting_commit
    if not start or is_workspace(c.m):
        return []
    return _differing(
        c, lambda rel: git.show(c.groot, start, os.path.relpath(c.root / rel, c.groot))
    )


def _differing(c: CampaignContext, was: Callable[[str], bytes | None]) -> list[str]:
    """The kernel files whose working-tree bytes (None: missing) differ from ``was(rel)``."""
    out = []
    for rel in c.m.kernel_source:
        path = c.root / rel
        if (path.read_bytes() if path.exists() else None) != was(rel):
            out.append(rel)
    return out


def code_changed_files(c: CampaignContext) -> list[str]:
    """The changed kernel files whose code differs, not only their comments, docstrings or
    layout (a Python file read by ``ast``; any other file by its bytes)."""
    out = []
    for rel in changed_kernel_files(c):
        path = c.root / rel
        now_ = path.read_bytes() if path.exists() else None
        was = incumbent_bytes(c, rel)
        if not rel.endswith(".py") or now_ is None or was is None or _code(now_) != _code(was):
            out.append(rel)
    return out


def _code(source: bytes) -> str | bytes:
    """What a Python file computes: its syntax tree without docstrings or other bare strings
    (statements that do nothing); the bytes where it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [st for st in stmts if not _bare_string(st)]
                setattr(node, field, kept or [ast.Pass()])
    return ast.dump(tree)


def _bare_string(st: ast.stmt) -> bool:
    return (
        isinstance(st, ast.Expr)
        and isinstance(st.value, ast.Constant)
        and isinstance(st.value.value, str)
    )


def kernel_changed(c: CampaignContext) -> bool:
    """Whether any kernel file of the working tree differs from the incumbent's."""
    return bool(changed_kernel_files(c))


def incumbent_commit(c: CampaignContext) -> str | None:
    """The commit the incumbent's tree starts from: the last accepted round's, or the
    starting commit where rounds are not committed (None before either exists)."""
    return c.state.incumbent_commit if c.m.git_commit else c.m.starting_commit


def ambient(c: CampaignContext) -> dict[str, str | None]:
    """Fingerprints of the user's own changes outside the kernel files: uncommitted ones, and
    those committed since the incumbent's commit (a commit does not take a change out of a
    round's scope)."""
    if is_workspace(c.m):  # the workspace's own files, not the project's
        return workspace_ambient(c)
    # the tool writes exports (records, never code) and tips
    kernel = set(c.kernel_git) | {p for p in c.state.exported if p.endswith(RECORD_SUFFIXES)}
    tips = os.path.relpath(c.profile.tips_root_path, c.groot) + "/"
    paths = set(git.changed_paths(c.groot)) | set(git.committed_since(c.groot, incumbent_commit(c)))
    # a module the kernel imports from beside it, kept out of every commit by an ignore rule
    packages = sorted({p.split("/", 1)[0] for p in c.kernel_git if "/" in p})
    paths |= set(git.ignored_modules(c.groot, packages))
    return {
        p: file_sha256(c.groot / p)
        for p in sorted(paths)
        if p not in kernel and not p.startswith(tips)
    }


def out_of_scope(c: CampaignContext) -> list[str]:
    """Files outside kernel_source changed since the last round closed."""
    now_ = ambient(c)
    before = c.state.ambient
    return sorted(p for p in set(now_) | set(before) if now_.get(p, "-") != before.get(p, "-"))


def scope_reason(c: CampaignContext, scope: list[str]) -> str:
    """Why a round that changed ``scope`` (files outside kernel_source) is rolled back; says how
    to make git show the edits it hides (skip-worktree / assume-unchanged) when it hides any."""
    why = (
        f"files outside kernel_source changed: {scope}; a round may change only the "
        "kernel files. Revert them before the next round (git checkout -- FILE, or git "
        "stash): `ratchet accept` refuses a campaign branch that changed other files, so "
        "make such changes before `ratchet init` or after `ratchet accept`"
    )
    own = [p for p in scope if p in c.state.ambient and c.state.ambient[p] is not None]
    if own:
        why += (
            f". {', '.join(own)} held an uncommitted edit of yours when the last round closed: "
            "put that version back (git checkout would drop it too)"
        )
    base = incumbent_commit(c)
    done = [] if is_workspace(c.m) else sorted(set(scope) & set(git.committed_since(c.groot, base)))
    if done and base:
        why += (
            f". {', '.join(done)} changed in a commit since the incumbent's ({base[:12]}): "
            f"restore {'it' if len(done) == 1 else 'them'} with `git checkout {base[:12]} -- "
            f"{' '.join(done)}` and commit, or revert that commit"
        )
    new = [] if is_workspace(c.m) else _untracked(c, scope)
    if code := [p for p in new if p.endswith(".py")]:
        why += (
            f". {', '.join(code)} {'is a module' if len(code) == 1 else 'are modules'} no commit "
            "holds (untracked or ignored by git): if the kernel imports it, an accepted commit "
            "would not run without it. kernel_source is frozen for the campaign: keep the "
            "change inside the kernel files, or list the module in kernel_source for the next "
            "campaign; otherwise move it out of the project"
        )
    if other := [p for p in new if not p.endswith(".py")]:
        why += (
            f". {', '.join(other)} {'is' if len(other) == 1 else 'are'} not tracked by git: "
            "move it out of the project, or list it in .git/info/exclude (untracked itself) "
            "or in a .gitignore you commit before `ratchet init` (git checkout cannot "
            "restore it)"
        )
    hidden = {} if is_workspace(c.m) else git.hidden_paths(c.groot)
    masked = [p for p in scope if p in hidden]
    if masked:
        why += (
            f" ({', '.join(masked)} hidden from `git status` by its index flag; run "
            f"`{git.unhide_command(masked)}` to see the edit)"
        )
    return why


def _untracked(c: CampaignContext, paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to the git top level) that exist and git does not track."""
    tracked = _tracked(c, paths)
    return [p for p in paths if p not in tracked and (c.groot / p).exists()]


def _tracked(c: CampaignContext, paths: list[str]) -> set[str]:
    return set(git.git(c.groot, "ls-files", "--", *paths).split()) if paths else set()


def edited_meanwhile(c: CampaignContext) -> list[str]:
    """Files outside kernel_source changed since the round opened that the round's own
    steps do not write: every such file of a workspace (its caches and run outputs are not
    counted), and the files git tracks in a project (a test or build leaves its untracked
    outputs and compiled caches, which the snapshot then takes in as before)."""
    scope = split_ignored(out_of_scope(c))[0]
    if is_workspace(c.m) or not scope:
        return scope
    tracked = _tracked(c, scope)
    return [p for p in scope if p in tracked]


def refuse_hidden_kernel(c: CampaignContext) -> None:
    """Raise GitError when a kernel file is flagged skip-worktree or assume-unchanged."""
    if not is_workspace(c.m):
        git.require_visible(c.groot, c.kernel_git)


def candidate_diff(c: CampaignContext) -> str:
    """The working tree's kernel files against the incumbent's, as a unified diff."""
    if is_workspace(c.m):
        return _workspace_diff(c)
    if c.m.git_commit and c.state.incumbent_commit:
        return git.diff(c.groot, c.state.incumbent_commit, c.kernel_git)
    return ""


def _workspace_diff(c: CampaignContext) -> str:
    """Unified diff of the workspace kernel files against the incumbent's snapshot (a file
    absent on one side diffs against nothing)."""
    chunks = []
    for rel in c.m.kernel_source:
        old = incumbent_bytes(c, rel)
        path = c.root / rel
        new = path.read_bytes() if path.exists() else None
        if old == new:
            continue
        a = (old or b"").decode("utf-8").splitlines(keepends=True)
        b = (new or b"").decode("utf-8").splitlines(keepends=True)
        src = f"a/{rel}" if old is not None else "/dev/null"
        dst = f"b/{rel}" if new is not None else "/dev/null"
        chunks.append("".join(difflib.unified_diff(a, b, src, dst)))
    return "".join(chunks)


def kernel_texts(c: CampaignContext) -> tuple[dict[str, str], dict[str, str]]:
    """The Python kernel files' text, ``(incumbent, working tree)``, path -> source."""
    before, after = {}, {}
    for rel in c.m.kernel_source:
        if not rel.endswith(".py"):
            continue
        old, path = incumbent_bytes(c, rel), c.root / rel
        if old is not None:
            before[rel] = old.decode("utf-8", errors="replace")
        if path.exists():
            after[rel] = path.read_text(encoding="utf-8", errors="replace")
    return before, after
