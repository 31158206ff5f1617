"""What the tests of the warp-specialized (Gluon) kernels share: an offline compile in a
process of its own, the check of what it compiled to, and a stand-in kernel that records its
launches."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kernel_ratchet.kernels.offline import Resources

_COMPILE = """
import dataclasses, json, sys
from importlib import import_module
from kernel_ratchet.kernels.offline import resources
launcher, calls = import_module(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps([dataclasses.asdict(resources(launcher.compile_offline(**kw))) for kw in calls]))
"""


def compiled_in_a_fresh_process(launcher: str, calls: list[dict]) -> list[Resources]:
    """``launcher.compile_offline(**kw)`` for each of ``calls``, compiled in a process of its
    own without the interpreter: in a pytest-xdist worker that had run interpreted kernels, a
    compile once failed inside ``tl.cdiv`` on raw IR values, as if the interpreter's patches of
    ``triton.language`` were still in place."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", _COMPILE, launcher, json.dumps(calls)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return [Resources(**r) for r in json.loads(out.stdout.strip().splitlines()[-1])]


def assert_unspilled_and_pipelined(res: Resources, what: object = "") -> None:
    """The compiled kernel fits an sm_90 SM, ptxas spilled no register and kept the wgmma
    pipeline asynchronous; ``what`` names the launch in a failure."""
    assert res.fits(), (what, res.line())
    assert res.spill_bytes == 0, (what, res.line())
    assert not res.serialized, f"ptxas serialized the wgmma pipeline: {what or res.line()}"


class LaunchRecorder:
    """Stands in for the Gluon kernel: ``kernel[grid](*args, **kw)`` records instead of running."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((grid, args, kw))
