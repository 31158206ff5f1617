"""The fp32-workspace hand-offs between the threads of a CTA, read from the sm_90 PTX that the
dense GEMM kernels compile to (offline, no GPU).

Split-K that finishes its own tiles: the tile's last K slice loads its fp32 slot and zeroes it
for the next launch. Triton gives the load and the zeroing store different blocked layouts,
so one thread zeroes outputs that another reads: without a CTA barrier between them, eight-warp
forwards summed rows wrongly on an H100. Stream-K: every thread stores its share of a partial
tile, then one thread raises the tile's flag; without a barrier between, the finisher can read
a partial before all of it is stored. The GPU tests (``test_gemm_split_finish``,
``test_gemm_streamk``) run the sums; these read the order the compiler emitted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: Records each launch on meta tensors and prints its PTX (run without ``TRITON_INTERPRET``).
_COMPILE = r"""
import json, torch
from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.gemm.census import census_call
from kernel_ratchet.kernels.gemm.configs import CONFIGS, GemmConfig
from kernel_ratchet.kernels.gemm.kernel import _gemm_kernel
from kernel_ratchet.kernels.gemm.kernel_streamk import _gemm_streamk_kernel
from kernel_ratchet.kernels.offline_compile import compile_launch

t = lambda *s: torch.empty(*s, device="meta", dtype=torch.bfloat16)
# the shipped split configs of a forward (four warps) and of a dgrad (eight), and stream-K
cases = {
    "split_forward": (_gemm_kernel, (t(256, 4096), t(4096, 4096)), {},
                      CONFIGS["bf16"]["skinny"]),
    "split_dgrad": (_gemm_kernel, (t(256, 4096), t(4096, 4096)),
                    {"b_kmajor": False, "kind": "bf16_bwd"}, CONFIGS["bf16_bwd"]["medium"]),
    "stream_k": (_gemm_streamk_kernel, (t(500, 30000), t(2000, 30000)), {},
                 GemmConfig(128, 128, 64, num_warps=8, num_stages=3, use_tma=True,
                            stream_k=True)),
}
out = {}
for name, (fn, ab, kw, cfg) in cases.items():
    c = census_call(lambda: launch.matmul(*ab, config=cfg, **kw), dry=True)
    (x,) = c.gemms()
    assert x.kernel == fn.fn.__name__, x.kernel
    out[name] = {"constexprs": dict(x.constexprs), "ptx": compile_launch(fn, x).asm["ptx"]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    run = subprocess.run(
        [sys.executable, "-c", _COMPILE], capture_output=True, text=True, env=env, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def _lines(ptx: str) -> list[str]:
    return [line.strip() for line in ptx.splitlines()]


def _barrier_between(lines: list[str], before: int, after: int) -> bool:
    return any(line.startswith("bar.sync") for line in lines[before + 1 : after])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["split_forward", "split_dgrad"])
def test_a_finishing_slice_reads_its_whole_slot_before_any_thread_zeroes_it(compiled, case):
    case = compiled[case]
    assert case["constexprs"]["SPLIT_FINISH"]
    lines = _lines(case["ptx"])
    loads = [i for i, line in enumerate(lines) if line.startswith("ld.global.cg")]
    assert loads, "the finishing slice's slot load (ld.global.cg) is not in the PTX"
    zeroing = next(
        (i for i, line in enumerate(lines) if i > loads[-1] and "st.global" in line), None
    )
    assert zeroing is not None, "no store follows the slot load"
    assert _barrier_between(lines, loads[-1], zeroing), (
        "the slot is zeroed with no CTA barrier after the last thread's load of it"
    )


@pytest.mark.slow
def test_a_stream_k_partial_is_stored_by_every_thread_before_its_flag_is_raised(compiled):
    lines = _lines(compiled["stream_k"]["ptx"])
    release = [i for i, line in enumerate(lines) if "atom" in line and ".release." in line]
    assert len(release) == 1, "one flag release expected"
    stores = [i for i, line in enumerate(lines[: release[0]]) if "st.global" in line]
    assert stores, "no partial-tile store precedes the flag's release"
    assert _barrier_between(lines, stores[-1], release[0]), (
        "the flag is released with no CTA barrier after the last thread's store of the partial"
    )
