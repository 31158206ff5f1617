"""A gated step prepares beside other work and does its real work only once released; a gated
step that is never needed is stopped, and nothing it would have written appears."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kernel_ratchet.campaign.steps import start_step

CHILD = (
    "import sys, time; from kernel_ratchet.harness.start_gate import wait_for_start; "
    "open(sys.argv[1] + '.ready', 'w').close(); ok = wait_for_start(); "
    "open(sys.argv[1], 'w').write(repr(time.monotonic()) if ok else 'refused')"
)


def _start(tmp_path: Path, out: Path):
    cmd = f'{sys.executable} -c "{CHILD}" {out}'
    return start_step(
        "child", cmd, cwd=tmp_path, log_path=tmp_path / "child.log", gate=tmp_path / "g"
    )


def test_a_gated_step_works_only_after_its_release(tmp_path: Path) -> None:
    out = tmp_path / "done"
    step = _start(tmp_path, out)
    deadline = time.monotonic() + 60
    while not Path(f"{out}.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the child is prepared: now it waits for the gate
    assert Path(f"{out}.ready").exists() and not out.exists()
    released = time.monotonic()
    result = step.wait(60)
    assert result.ok, Path(result.log).read_text()
    assert float(out.read_text()) >= released  # CLOCK_MONOTONIC is shared by processes
    assert result.seconds <= time.monotonic() - released
    assert not (tmp_path / "g").exists() and not (tmp_path / "child.log.pgid").exists()


def test_a_gated_step_never_released_is_stopped_without_working(tmp_path: Path) -> None:
    out = tmp_path / "done"
    step = _start(tmp_path, out)
    step.stop()
    assert step.proc.poll() is not None and not out.exists()
    assert not (tmp_path / "child.log.pgid").exists()


def test_a_ctrl_c_whose_raise_was_lost_stops_the_next_wait(tmp_path: Path) -> None:
    """Python drops a KeyboardInterrupt raised in a fork's at-fork hooks (inside Popen): the
    CLI's handler also sets INTERRUPT_REQUESTED, and a wait on a child raises it and stops it."""
    import pytest

    from kernel_ratchet.errors import INTERRUPT_REQUESTED

    out = tmp_path / "done"
    step = _start(tmp_path, out)
    INTERRUPT_REQUESTED.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            step.wait(60)
    finally:
        INTERRUPT_REQUESTED.clear()
    assert step.proc.poll() is not None and not out.exists()


LATE_CHILD = (
    "import os, sys, time; from kernel_ratchet.harness.start_gate import wait_for_start, _alive; "
    "driver = int(os.environ['RATCHET_START_GATE_DRIVER']); "
    "open(sys.argv[1] + '.ready', 'w').close(); "
    "exec('while _alive(driver): time.sleep(0.01)'); ok = wait_for_start(); "
    "open(sys.argv[1], 'w').write(repr(time.monotonic()) if ok else 'refused')"
)


@pytest.mark.parametrize("reaches_gate", ["before", "after"])
def test_a_gated_step_whose_driver_died_stops_waiting(tmp_path: Path, reaches_gate: str) -> None:
    """A driver killed before it could stop its gated harness (the shell between them dies
    with it), while the harness waits at its gate or before it got there (still importing):
    the harness gives up at once instead of waiting for hours."""
    import os
    import signal
    import subprocess

    out = tmp_path / "done"
    driver = (
        "import sys, time; from pathlib import Path; "
        "from kernel_ratchet.campaign.steps import start_step; "
        f"s = start_step('child', sys.argv[1], cwd=Path({str(tmp_path)!r}), "
        f"log_path=Path({str(tmp_path / 'child.log')!r}), gate=Path({str(tmp_path / 'g')!r})); "
        "print(s.proc.pid, flush=True); time.sleep(600)"
    )
    child = CHILD if reaches_gate == "before" else LATE_CHILD
    cmd = f'{sys.executable} -c "{child}" {out}'
    proc = subprocess.Popen([sys.executable, "-c", driver, cmd], stdout=subprocess.PIPE, text=True)
    shell = int(proc.stdout.readline())
    deadline = time.monotonic() + 60
    while not Path(f"{out}.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the harness is prepared (and, "before", waits at its gate)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    while time.monotonic() < deadline and os.path.exists(f"/proc/{shell}"):
        time.sleep(0.01)
    while time.monotonic() < deadline and not out.exists():
        time.sleep(0.01)
    assert out.read_text() == "refused"  # it gave up instead of measuring


def test_a_step_counts_its_seconds_to_its_exit_not_to_the_wait(tmp_path: Path) -> None:
    """A focused test run beside the measurement ends long before the round waits for it: its
    seconds are its own."""
    step = start_step(
        "quick", f"{sys.executable} -c pass", cwd=tmp_path, log_path=tmp_path / "q.log"
    )
    deadline = time.monotonic() + 60
    while step.ended is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the watcher has seen the exit
    assert step.ended is not None
    result = step.wait(60)
    assert result.ok and result.seconds == step.ended - step.t0 < time.monotonic() - step.t0
