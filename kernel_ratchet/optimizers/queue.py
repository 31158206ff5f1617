"""The ``queue`` optimizer: candidates prepared beforehand, one round each, in name order.

A queue is a directory of entries. Each is a unified diff of kernel files, ``NAME.diff`` or
``NAME.patch`` (as ``git diff`` writes it: paths from the repository's top, which may hold the
project in a folder), and beside it
``NAME.json`` with what the round states up front, the agent optimizer's fields::

    {"hypothesis": "...", "bucket": "K1", "expected": "...", "summary": "one line",
     "direction": "a stable key", "level": "quick"}

Only ``hypothesis`` is required (``direction`` defaults to ``queue:NAME``, ``summary`` to the
entry's name). ``"fix": true`` makes the entry a correctness fix, decided as ``ratchet validate
--fix`` decides one (against an incumbent that passes no shape, the only kind of round that
may run). ``"after": "OTHER"`` makes an entry wait for the earlier entry ``OTHER`` (its
diff made on top of that one's): it is measured once ``OTHER``'s round was accepted, and
skipped, with the reason in the run's end, once that round was rolled back. ``ratchet run
--optimizer queue --queue DIR`` measures the entries one round each against the incumbent of
their turn and ends the campaign (T4) when every entry was tried; an entry whose direction a
closed round already carries is not proposed again (an interrupted round's is, and one a
parallel step superseded), so ``ratchet resume`` goes on where the run stopped. With
``--gpus``, each step measures the next entries side by side.

Each diff is applied to the incumbent's kernel texts in a scratch directory (``git apply``
used as a patch tool there, never on the project's tree or history) and proposed as the
complete new texts. An entry that names a file outside kernel_source, or that no longer
applies because an earlier accepted round changed its lines, stops the run with what to do,
before anything is applied.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.patch_scope import patch_paths
from kernel_ratchet.optimizers.base import Optimizer, OptimizerContext, OptimizerError, Proposal
from kernel_ratchet.profile.schema import OpProfile
from kernel_ratchet.scoring.decision import Status

#: What a queue entry's diff may be named.
DIFF_SUFFIXES = (".diff", ".patch")


@dataclass(frozen=True)
class Entry:
    """One prepared candidate: its diff and what its round states."""

    name: str
    diff: Path
    fields: dict[str, Any]

    @property
    def direction(self) -> str:
        return str(self.fields.get("direction") or f"queue:{self.name}")

    @property
    def after(self) -> str | None:
        """The earlier entry this one needs accepted first, if any."""
        return str(self.fields["after"]) if self.fields.get("after") else None

    def proposal(self, files: dict[str, str]) -> Proposal:
        """The round of this entry on ``files`` (path -> new text); raises OptimizerError for
        fields a round cannot take."""
        f = self.fields
        try:
            return Proposal(
                hypothesis=str(f["hypothesis"]),
                bucket=str(f.get("bucket", "K1")),
                expected=str(f.get("expected", "")),
                summary=str(f.get("summary") or f"queue entry {self.name}"),
                direction=self.direction,
                level=str(f.get("level", "quick")),
                files=files,
                fix=f.get("fix", False),
            )
        except ValueError as exc:
            raise OptimizerError(f"queue entry {self.name}: {exc}") from exc


def read_queue(path: Path) -> list[Entry]:
    """The entries of the queue at ``path``, in name order; raises OptimizerError for a queue
    that is not there or is empty, and for an entry without its JSON or its hypothesis."""
    if not path.is_dir():
        raise OptimizerError(f"--queue {path}: not a directory of prepared diffs")
    entries, problems = [], []
    for diff in sorted(p for p in path.iterdir() if p.suffix in DIFF_SUFFIXES):
        meta = diff.with_suffix(".json")
        if not meta.is_file():
            problems.append(
                f"{diff.name} has no {meta.name} beside it (every diff in the queue is an "
                'entry): give it one ({"hypothesis": "..."}) or move the diff out of the queue'
            )
            continue
        try:
            fields = json.loads(meta.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            problems.append(f"{meta.name}: {exc}")
            continue
        if not isinstance(fields, dict) or not str(fields.get("hypothesis", "")).strip():
            problems.append(f'{meta.name}: needs a "hypothesis"')
            continue
        entries.append(Entry(diff.stem, diff, fields))
    names = [e.name for e in entries]
    for e in entries:
        if e.after is not None and e.after not in names[: names.index(e.name)]:
            problems.append(f'{e.name}.json: "after" names {e.after!r}, not an earlier entry')
    if problems:
        raise OptimizerError(f"--queue {path}: " + "; ".join(problems))
    if not entries:
        raise OptimizerError(
            f"--queue {path} holds no entry: give NAME.diff (kernel files only) and NAME.json "
            '({"hypothesis": "..."}) per candidate'
        )
    return entries


def _kernel_file(path: str, kernel: tuple[str, ...]) -> str | None:
    """The kernel_source path a diff's ``path`` names: itself, or the same file named from
    the top of a repository that holds the project in a folder (as ``git diff`` writes it);
    None for any other, an absolute path or one that climbs out (``..``) included."""
    if Path(path).is_absolute() or ".." in Path(path).parts:
        return None
    return next((k for k in kernel if path == k or path.endswith("/" + k)), None)


def kernel_files(entry: Entry, text: str, kernel: tuple[str, ...]) -> dict[str, str]:
    """The files ``entry``'s diff ``text`` names, each with the kernel_source path it is;
    raises OptimizerError for a diff that names another file or none."""
    named = {p: _kernel_file(p, kernel) for p in patch_paths(text)}
    outside = [p for p, k in named.items() if k is None]
    if outside or not named:
        raise OptimizerError(
            f"queue entry {entry.name} changes {', '.join(outside) or 'no file'}, not the "
            f"kernel files ({', '.join(kernel)}): give the kernel part alone"
        )
    return {p: k for p, k in named.items() if k is not None}


def patched(entry: Entry, sources: dict[str, str], kernel: tuple[str, ...]) -> dict[str, str]:
    """The kernel files ``entry``'s diff changes, with their new texts, from the incumbent's
    ``sources`` (path -> text; ``kernel``: every kernel_source path, a file to come included);
    raises OptimizerError for a diff that names other files, deletes one, or does not apply."""
    text = entry.diff.read_text()
    named = kernel_files(entry, text, kernel)
    with tempfile.TemporaryDirectory(prefix="kr-queue-") as tmp:
        for p, k in named.items():
            if k in sources:
                (Path(tmp) / p).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / p).write_text(sources[k])
        done = subprocess.run(
            ["git", "apply", "-"], cwd=tmp, input=text, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise OptimizerError(
                f"queue entry {entry.name} does not apply to the incumbent's kernel files "
                f"({done.stderr.strip()}): an earlier round may have changed its lines; make "
                "it against the incumbent (the campaign's branch), then `ratchet resume`"
            )
        gone = [k for p, k in named.items() if not (Path(tmp) / p).exists()]
        if gone:
            raise OptimizerError(
                f"queue entry {entry.name} deletes {', '.join(gone)}: a round changes kernel "
                "files, it does not remove them"
            )
        return {k: (Path(tmp) / p).read_text() for p, k in named.items()}


class QueueOptimizer(Optimizer):
    """Proposes the queue's entries in order, each once (see the module doc)."""

    name = "queue"
    reads_profile = False

    def __init__(self, path: str) -> None:
        self.path = Path(path).resolve()
        self.entries = read_queue(self.path)
        self.skipped: dict[str, str] = {}  # entry -> why it was not measured

    def settings(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path)}

    def check_ready(self, root: Path, op: OpProfile) -> None:
        """Refuse, before a campaign spends its baseline, a queue with an entry outside the
        op's kernel files, or whose first entry does not apply to them as they are."""
        kernel = tuple(op.kernel_source)
        sources = {k: (Path(root) / k).read_text() for k in kernel if (Path(root) / k).is_file()}
        for entry in self.entries[1:]:
            kernel_files(entry, entry.diff.read_text(), kernel)
        patched(self.entries[0], sources, kernel)

    def propose(self, context: OptimizerContext) -> Proposal | None:
        return next(iter(self.propose_batch(context, 1)), None)

    def propose_batch(self, context: OptimizerContext, k: int) -> list[Proposal]:
        """The next ``k`` entries not yet measured (``ratchet run --gpus``: one per worker, each
        on the same incumbent). An interrupted entry is measured again, and so is one a parallel
        step superseded (accepted by its A/B, but another gained more): on the new incumbent."""
        again = (Category.INTERRUPTED, Category.SUPERSEDED)
        closed = {r.direction for r in context.rounds if r.direction and r.category not in again}
        accepted = {r.direction for r in context.rounds if r.status == Status.ACCEPTED}
        by_name = {e.name: e for e in self.entries}
        waiting = []
        for e in self.entries:
            need = by_name[e.after].direction if e.after else None
            if e.direction in closed or e.name in self.skipped:
                continue
            if e.after in self.skipped or (need in closed and need not in accepted):
                self.skipped[e.name] = f"{e.name} (after {e.after}, which was not accepted)"
                continue
            if need is not None and need not in accepted:
                break  # its prerequisite is still to be measured: nothing after it goes first
            waiting.append(e)
        sources = dict(context.sources)
        return [e.proposal(patched(e, sources, context.kernel_source)) for e in waiting[:k]]

    def done_note(self) -> str:
        """The entries skipped because the entry they needed was rolled back, if any."""
        return "; skipped: " + "; ".join(self.skipped.values()) if self.skipped else ""
