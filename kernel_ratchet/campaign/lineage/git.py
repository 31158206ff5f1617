"""Lineage: every git command the campaign runs, in one place.

A rollback restores only the kernel files from the incumbent commit; nothing here resets,
cleans or stashes anything else in the user's tree.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from kernel_ratchet.errors import BranchError, GitError


def git(
    root: Path,
    *args: str,
    check: bool = True,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``git args`` in ``root`` (``env``: extra environment); its stdout. Raises GitError
    on failure when ``check``."""
    full_env = {**os.environ, **env} if env else None
    proc = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, input=input, env=full_env
    )
    if check and proc.returncode != 0:
        hint = ""
        if "index.lock" in proc.stderr:
            hint = (
                " (a git command was killed while it wrote the index: if no git command is "
                "running in this repository, remove the .lock file named above and run the "
                "command again; the round in flight is finished then)"
            )
        raise GitError(f"`git {' '.join(args)}` failed in {root}: {proc.stderr.strip()}{hint}")
    return proc.stdout


def is_ancestor(root: Path, commit: str, of: str = "HEAD") -> bool:
    """Whether ``commit`` is ``of`` or one of its ancestors (False for an unknown commit)."""
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", commit, of], cwd=root, capture_output=True
    )
    return proc.returncode == 0


def toplevel(path: Path) -> Path:
    """The top level of the git repository holding ``path``; raises GitError outside one."""
    out = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise GitError(f"{path} is not inside a git repository; run `git init` and commit first")
    return Path(out.stdout.strip())


def head(root: Path) -> str:
    """The HEAD commit's sha; raises GitError in a repository without a commit."""
    out = git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).strip()
    if not out:
        raise GitError("the repository has no commit yet; commit the project first")
    return out


def current_branch(root: Path) -> str:
    """The checked-out branch (``HEAD`` when detached)."""
    return git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()


def require_branch(root: Path, branch: str, campaign: str) -> None:
    """Raise BranchError unless ``branch`` (campaign ``campaign``'s) is checked out, and
    GitError while a merge, rebase, cherry-pick or revert is in progress (a round's commit
    would fail, or take the operation's changes with it)."""
    current = current_branch(root)
    if current != branch:
        where = "HEAD is detached" if current == "HEAD" else f"{current} is checked out"
        raise BranchError(
            f"campaign {campaign} commits on branch {branch}, but {where}; "
            f"nothing was measured or changed. Run `git checkout {branch}` and run the "
            "command again"
        )
    gitdir = Path(git(root, "rev-parse", "--absolute-git-dir").strip())
    for marker, what, abort in _IN_PROGRESS:
        if (gitdir / marker).exists():
            raise GitError(
                f"{what} is in progress in {root}; nothing was measured or changed. Finish it "
                f"(commit) or abort it (`{abort}`), then run the command again"
            )


#: Files git keeps while an operation waits for the user: (file, what, how to abort).
_IN_PROGRESS = (
    ("MERGE_HEAD", "a merge", "git merge --abort"),
    ("rebase-merge", "a rebase", "git rebase --abort"),
    ("rebase-apply", "a rebase (or git am)", "git rebase --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --abort"),
)


def branch_exists(root: Path, name: str) -> bool:
    """Whether the local branch ``name`` exists."""
    return bool(git(root, "rev-parse", "--verify", "-q", f"refs/heads/{name}", check=False).strip())


def create_branch(root: Path, name: str) -> None:
    """Create and switch to ``name`` keeping the working tree (and its changes) as it is."""
    if branch_exists(root, name):
        raise GitError(
            f"branch {name} already exists; delete it (`git branch -D {name}`) or start the "
            "campaign with --git-branch none"
        )
    git(root, "switch", "-c", name)


def commits_beyond(root: Path, base: str, branch: str) -> int:
    """How many commits branch ``branch`` holds that ``base`` does not."""
    return int(git(root, "rev-list", "--count", f"{base}..refs/heads/{branch}").strip())


def checked_out_at(root: Path, branch: str) -> Path | None:
    """The worktree of ``root``'s repository where ``branch`` is checked out; None if none."""
    out = git(root, "worktree", "list", "--porcelain")
    here = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            here = Path(line[len("worktree ") :])
        elif line == f"branch refs/heads/{branch}":
            return here
    return None


def held_elsewhere(root: Path, branch: str) -> bool:
    """Whether another branch or a tag holds ``branch``'s tip commit."""
    out = git(root, "for-each-ref", "--contains", f"refs/heads/{branch}", "--format=%(refname)")
    return any(ref != f"refs/heads/{branch}" for ref in out.split())


def delete_branch(root: Path, branch: str) -> None:
    """Delete the local branch ``branch`` (the caller has checked that it holds no work)."""
    git(root, "branch", "-D", "--", branch)


def exclude(root: Path, rel: str) -> None:
    """Add ``/rel/`` to .git/info/exclude (once)."""
    gitdir = Path(git(root, "rev-parse", "--git-dir").strip())
    if not gitdir.is_absolute():
        gitdir = root / gitdir
    path = gitdir / "info" / "exclude"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = "/" + rel.strip("/") + "/"
    existing = path.read_text().splitlines() if path.exists() else []
    if line not in existing:
        with open(path, "a") as f:
            if existing and existing[-1] != "":
                f.write("\n")
            f.write(line + "\n")


def show(root: Path, commit: str, rel: str) -> bytes | None:
    """A file's bytes at ``commit``; None when it did not exist there."""
    proc = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=root, capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def hidden_paths(root: Path) -> dict[str, str]:
    """Tracked files whose edits ``git status`` does not show: path -> the flag that hides
    them (``skip-worktree`` or ``assume-unchanged``; ``git ls-files -v`` tags them ``S`` or in
    lower case)."""
    out = git(root, "ls-files", "-v", "-z")
    found = {}
    for item in out.split("\0"):
        tag, path = item[:1], item[2:]
        if tag == "S" or (tag.islower() and tag != "s"):
            found[path] = "skip-worktree" if tag == "S" else "assume-unchanged"
        elif tag == "s":
            found[path] = "skip-worktree, assume-unchanged"
    return found


def hidden_edits(root: Path) -> dict[str, str]:
    """Hidden tracked files (:func:`hidden_paths`) whose working-tree bytes differ from HEAD's
    blob: edits ``git status`` does not show. An absent skip-worktree file (a sparse checkout)
    is no edit."""
    hidden = hidden_paths(root)
    present = [p for p in hidden if (root / p).is_file() or (root / p).is_symlink()]
    if not present:
        return {}
    listed = git(root, "ls-tree", "-z", "HEAD", "--", *present)
    blobs = {}
    for item in filter(None, listed.split("\0")):
        meta, path = item.split("\t", 1)
        blobs[path] = meta.split()[2]
    now = [git(root, "hash-object", "--", p).strip() for p in present if "\n" in p]
    present = [p for p in present if "\n" in p] + [p for p in present if "\n" not in p]
    listed_paths = "".join(f"{p}\n" for p in present if "\n" not in p)
    now += git(root, "hash-object", "--stdin-paths", input=listed_paths).split()
    return {p: hidden[p] for p, sha in zip(present, now, strict=True) if blobs.get(p) != sha}


def unhide_command(paths: Sequence[str]) -> str:
    """The command that makes ``git status`` show edits to ``paths`` again."""
    return "git update-index --no-skip-worktree --no-assume-unchanged -- " + " ".join(paths)


def require_visible(root: Path, paths: Sequence[str]) -> None:
    """Raise GitError when one of ``paths`` (kernel files) is flagged skip-worktree or
    assume-unchanged: git would neither show nor commit its edits."""
    hidden = hidden_paths(root)
    masked = [p for p in paths if p in hidden]
    if masked:
        flags = sorted({hidden[p] for p in masked})
        raise GitError(
            f"kernel file(s) {', '.join(masked)} are flagged {' / '.join(flags)} in git's "
            "index, so git neither shows nor commits their edits; nothing was measured. Run "
            f"`{unhide_command(masked)}` and run the command again"
        )


def changed_paths(root: Path) -> list[str]:
    """Paths that differ from HEAD in the working tree, untracked (not ignored) ones included;
    also edits to tracked files hidden from ``git status`` (:func:`hidden_edits`)."""
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    paths, items, i = [], out.split("\0"), 0
    while i < len(items):
        item = items[i]
        if not item:
            i += 1
            continue
        code, path = item[:2], item[3:]
        paths.append(path)
        if code[0] in "RC":  # a rename carries the old path as the next item
            i += 1
            paths.append(items[i])
        i += 1
    return sorted(set(paths) | set(hidden_edits(root)))


def ignored_modules(root: Path, under: list[str]) -> list[str]:
    """Python modules under the folders ``under`` that git ignores (``.gitignore``,
    ``.git/info/exclude``): code an import can load that no commit holds."""
    if not under:
        return []
    out = git(root, "ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--", *under)
    return sorted(p for p in out.split("\0") if p.endswith(".py"))


def committed_since(root: Path, base: str | None) -> list[str]:
    """Paths that commits since ``base`` (up to HEAD) changed; [] without a base."""
    if not base:
        return []
    return sorted(p for p in git(root, "diff", "--name-only", "-z", base, "HEAD").split("\0") if p)


def commit_only(root: Path, paths: Sequence[str], message: str) -> str | None:
    """Commit exactly ``paths`` (whatever else is staged stays staged). Returns the sha, or
    None when those paths hold no change against HEAD."""
    existing = [p for p in paths if (root / p).exists() or show(root, "HEAD", p) is not None]
    if not git(root, "status", "--porcelain", "--", *existing).strip():
        return None
    git(root, "add", "--", *[p for p in existing if (root / p).exists()])
    git(root, "commit", "-q", "--only", "-F", "-", "--", *existing, input=message)
    return head(root)


def diff(root: Path, commit: str, paths: Sequence[str]) -> str:
    """The working tree's diff of ``paths`` against ``commit`` (empty when it cannot be made),
    a path git does not track yet included as a new file."""
    text = git(root, "diff", commit, "--", *paths, check=False)
    tracked = set(git(root, "ls-files", "--", *paths, check=False).splitlines())
    for p in paths:
        if p not in tracked and (root / p).is_file():
            text += git(root, "diff", "--no-index", "--", "/dev/null", p, check=False)
    return text


def log_message(root: Path, rev: str = "HEAD") -> str:
    """The full message of ``rev`` (empty when there is none)."""
    return git(root, "log", "-1", "--format=%B", rev, check=False)


def keep_files(root: Path, files: Mapping[str, bytes | None], ref: str, message: str) -> str:
    """Point ``ref`` at a new commit whose tree is HEAD's with ``files`` (path relative to
    ``root`` -> bytes, None: deleted) written over it; returns the commit's sha.

    Only plumbing on a private index file: the user's index, HEAD, branches and working tree
    are left exactly as they are."""
    parent = head(root)
    with tempfile.TemporaryDirectory(prefix="ratchet-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(root, "read-tree", parent, env=env)
        for rel, data in files.items():
            if data is None:
                git(root, "update-index", "--force-remove", "--", rel, env=env)
                continue
            with open(Path(tmp) / "blob", "wb") as f:
                f.write(data)
            blob = git(root, "hash-object", "-w", "--", str(Path(tmp) / "blob")).strip()
            mode = "100755" if os.access(root / rel, os.X_OK) else "100644"  # as in the tree
            git(root, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{rel}", env=env)
        tree = git(root, "write-tree", env=env).strip()
    sha = git(root, "commit-tree", tree, "-p", parent, "-F", "-", input=message).strip()
    git(root, "update-ref", ref, sha)
    return sha
