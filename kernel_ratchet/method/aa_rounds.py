"""What one quick round of an op costs and resolves on this machine: A/A rounds, timed.

In a throwaway clone of the repository's committed HEAD (your working tree and campaigns are
not touched), it opens a campaign of the op (``ratchet init``, ``ratchet baseline``), then runs
rounds whose only change is a line added to a kernel file (a module constant nothing reads in
a Python file, a comment elsewhere; ``ratchet validate``: both sides of the paired A/B run the
same kernels), as a user would, through the CLI. It prints each round's
seconds per step (``round.json``'s ``seconds``, what ``ratchet status`` shows), its decision
and the per-shape CI half-widths of its paired A/B::

    python -m kernel_ratchet.method.aa_rounds gemm_bf16 --rounds 2 --keep aa_records

The op must be in the committed ``ratchet.yaml``. The clone's project directory (and its
``src/``, where there is one) comes first on ``PYTHONPATH``, so the kernels measured are the
clone's. ``--keep DIR``
exports the campaign's records there (``ratchet export``). Both rounds should be rolled back;
an A/A round accepted is a false accept, and the table says so.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kernel_ratchet.campaign.lineage.git import git, toplevel
from kernel_ratchet.campaign.record import OVERLAP_STEP, RoundRecord, read_record
from kernel_ratchet.errors import RatchetError

#: Comment syntax by kernel-file suffix: the A/A change is one such line at the file's end.
COMMENTS = {".py": "#", ".cu": "//", ".cuh": "//", ".cpp": "//", ".cc": "//", ".h": "//"}
COMMENTS |= {".hpp": "//", ".c": "//", ".triton": "#", ".mlir": "//"}
HYPOTHESIS = "A/A: a line added to a kernel file that changes no kernel, the same on both sides"


@dataclass(frozen=True)
class AARound:
    """One A/A round as its record says: decision, seconds per step, per-shape half-widths."""

    round: int
    status: str
    reason: str
    seconds: dict[str, float]
    half_widths: dict[str, float]  # label -> half-width of the per-shape ratio CI (relative)
    rounds: int | None

    @classmethod
    def from_record(cls, rec: RoundRecord) -> AARound:
        d = rec.decision
        shapes = d.per_shape if d else ()
        widths = {s.label: (s.ci[1] - s.ci[0]) / 2 for s in shapes if s.ci is not None}
        seconds = dict(rec.seconds or {})
        return cls(rec.round, rec.status.value, rec.reason, seconds, widths, d and d.rounds)


def comment_file(kernel_source: list[str]) -> tuple[str, str]:
    """(kernel file, comment marker): the first kernel file whose syntax is known."""
    for rel in kernel_source:
        marker = COMMENTS.get(Path(rel).suffix)
        if marker:
            return rel, marker
    raise RatchetError(
        f"none of the op's kernel files ({', '.join(kernel_source)}) has a comment syntax this "
        f"command knows ({', '.join(sorted(COMMENTS))}): A/A rounds need a file it can add a "
        "comment to"
    )


def aa_line(kernel: str, marker: str, i: int) -> str:
    """The line round ``i`` appends to ``kernel``. A Python file gets a module constant that
    nothing reads (a round refuses a change of comments alone, which Python files are read
    for); any other file, whose change is judged by its bytes, a comment."""
    if kernel.endswith(".py"):
        return f"\n_RATCHET_AA_ROUND = {i}  {marker} A/A: read by nothing, the same kernels\n"
    return f"\n{marker} A/A round {i}: a comment, no change to the code\n"


def clone(repo: Path, dest: Path) -> None:
    """A clone of ``repo``'s HEAD at ``dest``, with a committer set where none is."""
    git(toplevel(repo), "clone", "--quiet", ".", str(dest))
    for key, value in (("user.email", "aa-rounds@localhost"), ("user.name", "aa_rounds")):
        if not git(dest, "config", key, check=False).strip():
            git(dest, "config", key, value)


def _env(project: Path, top: Path) -> dict[str, str]:
    """The environment of the CLI in the clone: the project's directory (its ``src/`` where
    there is one, and the clone's root) first on ``PYTHONPATH``."""
    paths = [str(project)] + ([str(project / "src")] if (project / "src").is_dir() else [])
    paths += [str(top)] if top != project else []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


def ratchet(root: Path, top: Path, log: Path, *args: str) -> int:
    """Run the CLI in the clone's project directory ``root`` as a user would (``top``: the
    clone's root); its output is appended to ``log``."""
    with log.open("a") as out:
        out.write(f"\n$ ratchet {' '.join(args)}\n")
        out.flush()
        cmd = [sys.executable, "-m", "kernel_ratchet.cli", *args]
        return subprocess.run(cmd, cwd=root, env=_env(root, top), stdout=out, stderr=out).returncode


def round_records(campaign_dir: Path) -> list[AARound]:
    """The A/A rounds (round 2 on) of a campaign directory, in order."""
    records = (read_record(p) for p in campaign_dir.glob("rounds/round-*/round.json"))
    return sorted((AARound.from_record(r) for r in records if r.round > 1), key=lambda r: r.round)


def table(rounds: list[AARound]) -> str:
    """One markdown row per round: decision, seconds per step, half-widths. A test that ran
    beside the harness and the A/B (``test_gpu: false``) says so: its seconds are not added."""
    head = "| round | decision | test s | harness s | paired A/B s | round s | "
    head += "per-shape CI half-widths |"
    lines = [head, "|---|---|---:|---:|---:|---:|---|"]
    for r in rounds:
        s = r.seconds
        harness = s.get("harness_quick", s.get("harness_full"))
        ab = s.get("ab_quick", s.get("ab_full"))
        widths = sorted(r.half_widths.values())
        span = f"{widths[0]:.2%}-{widths[-1]:.2%}" if widths else "-"
        worst = max(r.half_widths, key=r.half_widths.get) if widths else ""
        status = r.status + (" (a false accept)" if r.status == "ACCEPTED" else "")
        test = _s(s.get("test")) + (" (beside)" if s.get(OVERLAP_STEP) else "")
        lines.append(
            f"| {r.round} | {status} | {test} | {_s(harness)} | {_s(ab)} "
            f"| {_s(s.get('measure'))} | {span}{f' (widest: {worst})' if worst else ''} |"
        )
    return "\n".join(lines)


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def run(op: str, rounds: int, here: Path, keep: Path | None, say=print) -> list[AARound]:
    """Clone, open a campaign of ``op``, run ``rounds`` A/A rounds; their records."""
    from kernel_ratchet.profile.loader import load_profile

    top = toplevel(here)
    with tempfile.TemporaryDirectory(prefix="aa-rounds-") as tmp:
        dest = Path(tmp) / "repo"
        clone(top, dest)
        cwd = dest / Path(here).resolve().relative_to(top.resolve())
        kernel, marker = comment_file(list(load_profile(cwd).op(op).kernel_source))
        log = Path(tmp) / "ratchet.log"
        t0 = time.monotonic()
        steps = [("init", ["init", "--op", op, "--yes", "--git-branch", "none"])]
        steps.append(("baseline", ["baseline"]))
        for name, args in steps:
            if ratchet(cwd, dest, log, *args):
                raise RatchetError(f"`ratchet {name}` failed in the clone:\n{_tail(log)}")
            say(f"{name}: done at {time.monotonic() - t0:.0f} s")
        for i in range(1, rounds + 1):
            with (dest / kernel).open("a") as f:
                f.write(aa_line(kernel, marker, i))
            change = ["--change", f"A/A line {i} in {kernel}", "--expected", "no change"]
            rc = ratchet(cwd, dest, log, "validate", "--hypothesis", HYPOTHESIS, *change)
            say(f"A/A round {i}: {_outcome(log, rc)} at {time.monotonic() - t0:.0f} s")
        out = keep or Path(tmp) / "records"
        if ratchet(cwd, dest, log, "export", str(out.resolve())):
            raise RatchetError(f"`ratchet export` failed in the clone:\n{_tail(log)}")
        if keep:  # portable, as the records are: the clone is ".", the records the keep dir
            text = log.read_text().replace(str(out.resolve()), str(keep))
            (keep / "ratchet.log").write_text(text.replace(str(cwd), "."))
        return round_records(out)


def _outcome(log: Path, rc: int) -> str:
    """The decision line the round printed last (the CLI's exit code where it printed none)."""
    for line in reversed(log.read_text().splitlines()):
        if line.startswith("round-") and any(w in line for w in ("ACCEPTED", "ROLLED BACK")):
            return line.split(":", 1)[0].split(" ", 1)[1]
    return f"no decision printed (ratchet validate exited {rc}; see the log)"


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text().splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    """``python -m kernel_ratchet.method.aa_rounds OP``: run the A/A rounds, print the table."""
    p = argparse.ArgumentParser(
        prog="python -m kernel_ratchet.method.aa_rounds", description=__doc__.split("\n")[0]
    )
    p.add_argument("op", help="an op of the committed ratchet.yaml")
    p.add_argument("--rounds", type=int, default=2, help="A/A rounds after the baseline")
    p.add_argument("--keep", type=Path, help="export the campaign's records (and its log) here")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    # a SIGTERM unwinds like Ctrl+C: the clone's temporary directory is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        found = run(args.op, args.rounds, Path.cwd(), args.keep)
    except RatchetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(found))
    return 1 if any(r.status == "ACCEPTED" for r in found) else 0


if __name__ == "__main__":
    sys.exit(main())
