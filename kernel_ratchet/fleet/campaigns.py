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

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
#: Seconds between two looks at the campaigns' states.
POLL_S = 1.0
#: Test hook: ``<op>`` kills the worker running that op's campaign (kill -9, the campaign's
#: process with it) once the campaign measures a round; only its first run, not the resume.
FAULT_ENV = "KERNEL_RATCHET_FLEET_FAULT"


@dataclass(frozen=True)
class CampaignTask:
    """One campaign's unattended run on a worker (plain data: it travels to the worker)."""

    op: str
    campaign: str
    root: str
    argv: tuple[str, ...]  # the ratchet command line
    log: str

    def command(self) -> str:
        # exec: the campaign's process is the one that dies with its worker (PR_SET_PDEATHSIG)
        return "exec " + shlex.join([sys.executable, "-m", "kernel_ratchet.cli", *self.argv])

    def resumed(self) -> CampaignTask:
        """The same campaign continued (``ratchet resume``), its output in a log of its own."""
        argv = ("resume", *(a for a in self.argv[1:] if a != "--yes"))
        return replace(self, argv=argv, log=str(drive_log(Path(self.log).parent)))


def drive_log(cdir: Path) -> Path:
    """The next free ``fleet-<n>.log`` of a campaign: every run of it keeps its own output."""
    n = 1
    while (cdir / f"fleet-{n}.log").exists():
        n += 1
    return cdir / f"fleet-{n}.log"


def drive(task: CampaignTask) -> int:
    """A worker's task: run the campaign's command; returns its exit code."""
    if os.environ.get(FAULT_ENV) == task.op and task.argv[0] == "run":
        watch = threading.Thread(target=_kill_mid_round, args=(Path(task.log).parent,))
        watch.daemon = True
        watch.start()
    step = run_step(
        f"campaign {task.campaign}",
        task.command(),
        cwd=Path(task.root),
        log_path=Path(task.log),
        timeout_s=7 * 24 * 3600.0,
    )
    return -1 if step.returncode is None else step.returncode


def _kill_mid_round(cdir: Path) -> None:
    """The test hook: kill this worker (kill -9) once the campaign measures a round."""
    while True:
        with contextlib.suppress(CampaignError):
            pending = State.load(cdir).pending
            if pending is not None and pending.round >= 2:
                os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.2)


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
        out.append(CampaignTask(op, name, str(profile.root), argv, str(drive_log(cdir))))
    return out


def status_line(profile: Profile, task: CampaignTask) -> str:
    """One line of the status view, read from the campaign's state."""
    st = State.load(profile.campaign_root_path / task.campaign)
    last = st.closed[-1] if st.closed else None
    done = f"round-{last.round} {last.status.value}" if last else "no round yet"
    term = f", {st.termination.code}" if st.termination else ""
    inc = f"round-{st.incumbent_round}" if st.incumbent_round else "-"
    return f"{task.op}  {task.campaign}  {st.phase.value}  incumbent {inc}; last {done}{term}"


def run_fleet(
    client, profile: Profile, todo: list[CampaignTask], say: Callable[[str], None]
) -> dict[str, int]:
    """Run every task on the cluster of ``client``, a status line per change; a campaign whose
    worker died (or whose process was killed) is resumed on another worker, ``RESTARTS``
    times. Returns op -> exit code (-1: its worker died)."""
    from distributed import as_completed

    restarts = {t.op: 0 for t in todo}
    by_key: dict[str, CampaignTask] = {}
    running = as_completed()

    def submit(t: CampaignTask) -> None:
        f = client.submit(drive, t, key=f"campaign-{t.campaign}-{time.time_ns()}", pure=False)
        by_key[f.key] = t
        running.add(f)

    for t in todo:
        submit(t)
    codes: dict[str, int] = {}
    seen: dict[str, str] = {}
    while True:
        _show(profile, todo, seen, say)
        if running.is_empty():
            return codes
        for f in running.next_batch(block=False) or []:
            t = by_key[f.key]
            code, why = _outcome(f)
            if why is None:
                codes[t.op] = code
            elif restarts[t.op] >= RESTARTS:
                say(f"{t.op}: {why} again; run `ratchet fleet` again to resume it")
                codes[t.op] = code
            else:
                restarts[t.op] += 1
                say(f"{t.op}: {why}; resuming campaign {t.campaign} on another worker")
                submit(t.resumed())
        time.sleep(POLL_S)


def _outcome(future) -> tuple[int, str | None]:
    """A finished task's exit code, and why its campaign should be resumed (None: it should
    not): its worker died or raised, or its process was killed by a signal."""
    if future.status != "finished":
        exc = future.exception()
        return -1, f"its worker died ({type(exc).__name__}: {str(exc)[:200]})"
    code = future.result()
    if code < 0 or code > 128:  # a signal, directly or through the shell (128 + N)
        return code, f"its campaign's process was killed (exit {code})"
    return code, None


def _show(
    profile: Profile, todo: list[CampaignTask], seen: dict[str, str], say: Callable[[str], None]
) -> None:
    """Say each campaign's status line when it changed."""
    for t in todo:
        line = status_line(profile, t)
        if seen.get(t.op) != line:
            seen[t.op] = line
            say(line)
