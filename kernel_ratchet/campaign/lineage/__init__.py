"""Lineage: where the incumbent's code lives and how a round's change reaches it.

* :mod:`.git` — every git command the campaign runs;
* :mod:`.kernel` — the kernel files: round snapshots, the incumbent's bytes (commit or
  snapshot), rollback, the scope check's fingerprints, the candidate's diff;
* :mod:`.worktree` — the incumbent as runnable code, a git worktree next to the project;
* :mod:`.workspace` — workspace-mode's extracted stack (extraction, its own scope view).
"""
