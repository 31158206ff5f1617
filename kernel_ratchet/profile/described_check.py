"""One call of a described op at ``ratchet check``: its function against its reference.

An op described in ``ratchet.yaml`` (``function``, ``inputs``, ``outputs``, ``gradients``) can
import cleanly and still be described wrong: two outputs declared where the function returns
one, gradients declared for a function with no backward. Those surfaced at BASELINE, as a
kernel that "fails its focused test". Here the op's built-in check
(:mod:`kernel_ratchet.profile.focused`) runs on its rehearsal shapes in the Triton interpreter,
with no GPU visible, in a process of its own: seconds, and the first failure's message.
"""

from __future__ import annotations

import os
import subprocess
import sys

from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX
from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.items import item as _item
from kernel_ratchet.profile.schema import OpProfile, Profile

WHAT = "op matches its reference (rehearsal shapes, CPU)"
BOUNDS = "integer inputs drawn over their declared range"
_TIMEOUT_S = 180


def focused_command(op: str) -> str:
    """The built-in focused test of op ``op`` (what ``ratchet new-op`` writes as its ``test``)."""
    return f"python -m kernel_ratchet.profile.focused {op}"


def described_call(profile: Profile, op: OpProfile) -> CheckItem | None:
    """The op called against its reference on the CPU check's shapes, in a subprocess, for an
    op described in ratchet.yaml or one (with an adapter class) whose focused test is this
    very call; None for an adapter op with a test of its own."""
    described = (op.adapter or "").startswith(DESCRIBED_PREFIX)
    if not described and op.test.strip() != focused_command(op.name):
        return None
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "kernel_ratchet.profile.focused", op.name]
    cmd += ["--profile", str(profile.path)]  # the file being checked, not ./ratchet.yaml
    try:
        done = subprocess.run(
            cmd, cwd=profile.root, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        detail = f"no answer in {_TIMEOUT_S} s on the rehearsal shapes; not checked"
        return CheckItem(f"{op.name}: {WHAT}", True, detail, warning=True)
    lines = (done.stdout + done.stderr).strip().splitlines()
    notes = [ln.removeprefix("note: ") for ln in lines if ln.startswith("note: ")]
    if done.returncode == 0:  # its summary is its last line out; stderr may hold warnings
        said = done.stdout.strip().splitlines()
        passed = said[-1] if said else "passed"
        if notes:
            return CheckItem(f"{op.name}: {WHAT}", True, "; ".join([passed, *notes]), warning=True)
        return _item(op, WHAT, True, passed)
    first = next((ln for ln in lines if ln.startswith(("FAIL", "error:"))), "")
    why = [ln for ln in lines if "Error:" in ln and not ln.startswith("FAIL")][-1:]
    why = [w for w in why if w.split("Error:", 1)[1].strip() not in first]  # said once
    return _item(
        op,
        WHAT,
        False,
        "; ".join([first, *why, *notes]) or (lines[-1] if lines else f"exit {done.returncode}"),
        f"correct the kernel, or the op's description in {profile.path.name} (outputs, "
        f"gradients, inputs); `{focused_command(op.name)}` shows it all",
    )


def integer_bounds(op: OpProfile) -> CheckItem | None:
    """A warning for a described op's integer inputs declared without a bound on their values:
    they are drawn in [0, 128), so an index into a larger dimension (a class id, a token, an
    expert) is never exercised past 127 and a kernel wrong there passes every check. None for
    an op with an adapter class, or whose integer inputs all have a bound."""
    from kernel_ratchet.harness.described import INT_HIGH
    from kernel_ratchet.harness.described_spec import description_of

    desc = description_of(op.adapter or "")
    if desc is None:
        return None
    inputs = desc.inputs
    loose = [n for n, t in inputs.items() if t.high is None and t.integer]
    if not loose:
        return None
    first = inputs[loose[0]]
    dims = ", ".join(str(d) for d in first.dims)
    detail = (
        f"{', '.join(loose)}: no bound on the values, so they are drawn in [0, {INT_HIGH}); an "
        f"index into a larger dimension is never exercised past {INT_HIGH - 1}"
    )
    fix = f"declare the range, e.g. {loose[0]}: '[{dims}] {first.dtype} < V' (values in [0, V))"
    return CheckItem(f"{op.name}: {BOUNDS}", True, f"{detail}; {fix}", warning=True)
