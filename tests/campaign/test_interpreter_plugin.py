"""A test that a campaign runs in Triton's interpreter computes as the harness does: the
interpreter's fixes (:mod:`kernel_ratchet.harness.interpreter`) reach it through kernel-ratchet's
pytest plugin; a pytest run by hand keeps the interpreter as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernel_ratchet.campaign.steps import run_step
from kernel_ratchet.harness.interpreter_plugin import STEP_ENV

#: A user's test of a bf16 ``tl.dot`` kernel, run on CPU tensors in the interpreter (which,
#: unfixed, computes bf16 products on bit patterns) and of the fixes' own mark.
USER_TEST = """
import os

os.environ["TRITON_INTERPRET"] = "1"
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter


@triton.jit
def _dot(a, b, c):
    o = tl.arange(0, 16)
    x = tl.load(a + o[:, None] * 16 + o[None, :])
    y = tl.load(b + o[:, None] * 16 + o[None, :])
    tl.store(c + o[:, None] * 16 + o[None, :], tl.dot(x, y))


def test_a_bf16_dot_in_the_interpreter():
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=g).bfloat16() for _ in range(2))
    c = torch.empty(16, 16)
    _dot[(1,)](a, b, c)
    assert getattr(interpreter._implicit_cvt, "fp32_floats", False)
    assert torch.allclose(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)
"""


def test_a_test_a_campaign_runs_gets_the_interpreters_fixes_and_one_run_by_hand_does_not(
    tmp_path: Path,
):
    (tmp_path / "test_user.py").write_text(USER_TEST)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"]
    step = run_step(
        "focused test", " ".join(command), cwd=tmp_path, log_path=tmp_path / "t.log", timeout_s=120
    )
    assert step.ok, (tmp_path / "t.log").read_text()[-2000:]
    env = {k: v for k, v in os.environ.items() if k != STEP_ENV}
    by_hand = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert by_hand.returncode == 1 and "fp32_floats" in by_hand.stdout, by_hand.stdout[-2000:]


def test_the_plugin_is_registered_for_pytest_to_load():
    from importlib.metadata import entry_points

    found = {e.name: e.value for e in entry_points(group="pytest11")}
    assert found.get("kernel_ratchet_interpreter") == "kernel_ratchet.harness.interpreter_plugin"
