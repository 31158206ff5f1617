"""Many campaigns at once: ``ratchet fleet`` runs one campaign per op, each on its own worker.

Every op's campaign is a workspace-mode campaign (its own extracted copy of the kernel files,
no branch switching), so several run side by side in one project; they share the project's
tips store. ``<campaign_root>/fleet.json`` maps each op to its campaign: running the same
``ratchet fleet`` again resumes every campaign that has not ended (the round a dead worker left
in flight is closed by the resume, as after any crash). A worker runs ``ratchet run`` /
``ratchet resume`` of its campaign as a child process (killed with its worker) and the status
view reads the campaigns' own records.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel_ratchet.campaign.fsutil import atomic_write_json
from kernel_ratchet.campaign.locate import list_campaigns
from kernel_ratchet.campaign.manifest import load_manifest
from kernel_ratchet.campaign.state import State
from kernel_ratchet.campaign.steps import run_step
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.profile.schema import Profile

FLEET_FILE = "fleet.json"
#: A campaign whose worker died is started again (``ratchet resume``) this many times.
RESTARTS = 1


@dataclass(frozen=True)
class CampaignTask:
    """One campaign's unattended run on a worker (plain data: it travels to the worker)."""

    op: str
    campaign: str
    root: str
    argv: tuple[str, ...]  # the ratchet command line
    log: str

    def command(self) -> str:
        return shlex.join([sys.executable, "-m", "kernel_ratchet.cli", *self.argv])


def drive(task: CampaignTask) -> int:
    """A worker's task: run the campaign's command; returns its exit code."""
    step = run_step(
        f"campaign {task.campaign}",
        task.command(),
        cwd=Path(task.root),
        log_path=Path(task.log),
        timeout_s=7 * 24 * 3600.0,
    )
    return -1 if step.returncode is None else step.returncode


def init_campaign(profile: Profile, op: str, max_iterations: int) -> None:
    """``ratchet init`` of a workspace-mode campaign of ``op``; raises CampaignError with its
    output when it fails."""
    argv = ["init", "--op", op, "--yes", "--mode", "workspace", "--profile", str(profile.path)]
    argv += ["--max-iterations", str(max_iterations)]
    r = subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.cli", *argv],
        cwd=profile.root,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise CampaignError(f"`ratchet init --op {op}` failed: {(r.stderr or r.stdout)[-500:]}")


def fleet_campaigns(
    profile: Profile, ops: Sequence[str], create: Callable[[str], None]
) -> dict[str, str]:
    """op -> campaign name, from ``fleet.json``; an op without one gets a new campaign
    (``create(op)`` runs ``ratchet init`` for it). Raises CampaignError when ``create`` made
    none."""
    path = profile.campaign_root_path / FLEET_FILE
    known = json.loads(path.read_text()) if path.exists() else {}
    for op in ops:
        if op in known:
            continue
        create(op)
        mine = [d for d in list_campaigns(profile) if load_manifest(d).target_op == op]
        if not mine:
            raise CampaignError(f"no campaign was created for op {op!r}")
        known[op] = mine[-1].name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, known)
    return {op: known[op] for op in ops}


def tasks(profile: Profile, names: dict[str, str], run_args: Sequence[str]) -> list[CampaignTask]:
    """The run (or resume) of every campaign that has not ended."""
    out = []
    for op, name in names.items():
        cdir = profile.campaign_root_path / name
        st = State.load(cdir)
        if st.phase.value in ("TERMINATED", "ACCEPTED"):
            continue
        verb = "run" if st.phase.value == "INITIALIZED" else "resume"
        argv = (verb, "--campaign", name, "--profile", str(profile.path), *run_args)
        if verb == "run":
            argv = (*argv, "--yes")
        out.append(CampaignTask(op, name, str(profile.root), argv, str(cdir / "fleet.log")))
    return out


def status_line(profile: Profile, task: CampaignTask) -> str:
    """One line of the status view, read from the campaign's state."""
    st = State.load(profile.campaign_root_path / task.campaign)
    last = st.closed[-1] if st.closed else None
    done = f"round-{last.round} {last.status.value}" if last else "no round yet"
    term = f", {st.termination.code}" if st.termination else ""
    return (
        f"{task.op:<16} {task.campaign:<40} {st.phase.value:<11} incumbent round-"
        f"{st.incumbent_round or '-'}; last {done}{term}"
    )


def run_fleet(
    client, profile: Profile, todo: list[CampaignTask], say: Callable[[str], None]
) -> dict[str, int]:
    """Run every task on the cluster of ``client``, a status line per change, each campaign
    started again (``ratchet resume``) when its worker died; returns op -> exit code."""
    from distributed import as_completed

    resumed = {t.op: 0 for t in todo}
    by_key = {}
    futures = []
    for t in todo:
        f = client.submit(drive, t, key=f"campaign-{t.campaign}-{time.time_ns()}", pure=False)
        by_key[f.key], futures = t, [*futures, f]
    codes: dict[str, int] = {}
    seen: dict[str, str] = {}
    ac = as_completed(futures)
    while not ac.is_empty():
        for t in todo:
            line = status_line(profile, t)
            if seen.get(t.op) != line:
                seen[t.op] = line
                say(line)
        for f in ac.next_batch(block=False) or []:
            t = by_key[f.key]
            if f.status == "finished":
                codes[t.op] = f.result()
                continue
            if resumed[t.op] >= RESTARTS:
                say(f"{t.op}: its worker died again; run `ratchet fleet` again to resume it")
                codes[t.op] = -1
                continue
            resumed[t.op] += 1
            argv = ("resume", *(a for a in t.argv[1:] if a != "--yes"))
            again = CampaignTask(t.op, t.campaign, t.root, argv, t.log)
            say(f"{t.op}: its worker died; resuming campaign {t.campaign} on another worker")
            nf = client.submit(drive, again, key=f"campaign-{t.campaign}-{time.time_ns()}")
            by_key[nf.key] = again
            ac.add(nf)
        time.sleep(2.0)
    return codes
