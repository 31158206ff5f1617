"""Compile a recorded launch for a GPU that is not here, and read what it costs the SM.

Triton compiles for any target it knows without a device: its front end, the NVIDIA backend and
the ``ptxas`` it ships run on a CPU. Given a :class:`~kernel_ratchet.kernels.census.Launch` (the
argument types and divisibility Triton specializes on, the constexprs and ``num_warps``, as a
census records them), :func:`compile_launch` builds the same kernel variant the launch would
build on an H100/H200 (sm_90), and :func:`resources` reads its static shared memory (Triton's
metadata) and its registers and spill bytes (``ptxas -v`` on the PTX). That is what decides
whether a configuration can launch at all (shared memory over :data:`SM90_SHARED_BYTES`) and
whether its accumulator fits the register file (spills are local-memory traffic in the
epilogue or the main loop), before any GPU time is spent.

:func:`resources_of` is the entry point: in a process where ``TRITON_INTERPRET=1`` made the
kernels interpreted functions (the CPU test suite), it compiles in a fresh process that imports
the kernel's module natively; :func:`resources_by_kernel` compiles several kernels' launches
there in one such process (each costs seconds to start: torch, Triton and the kernel modules).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kernel_ratchet.kernels.census import Launch
from kernel_ratchet.kernels.offline_compile import compile_launch

#: The most shared memory one block may use on sm_90 (227 KiB, opt-in).
SM90_SHARED_BYTES = 232448


@dataclass(frozen=True)
class Resources:
    """What one compiled variant takes from an SM."""

    shared_bytes: int
    registers: int | None
    spill_bytes: int | None  # local-memory spill stores per thread
    serialized: bool = False  # ptxas serializes the wgmma pipeline (C7512 / C7514)

    def fits(self, shared_limit: int = SM90_SHARED_BYTES) -> bool:
        return self.shared_bytes <= shared_limit

    def line(self) -> str:
        return f"shared {self.shared_bytes} B, {self.registers} regs, {self.spill_bytes} B spilled"


def resources(compiled: Any, arch: int = 90) -> Resources:
    """Shared memory from Triton's metadata; registers and spill stores from ``ptxas -v``
    (None each when ptxas does not report them)."""
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(arch).path
    with tempfile.TemporaryDirectory() as d:
        ptx = os.path.join(d, "kernel.ptx")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        out = subprocess.run(
            [ptxas, "-v", "--gpu-name", gpu, ptx, "-o", os.path.join(d, "kernel.o")],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores", out)
    return Resources(
        shared_bytes=int(compiled.metadata.shared),
        registers=int(regs.group(1)) if regs else None,
        spill_bytes=int(spill.group(1)) if spill else None,
        serialized="wgmma.mma_async instructions are serialized" in out,
    )


def compile_key(x: Launch) -> tuple:
    """What decides the compiled variant of a launch (not its grid or sizes)."""
    return (x.kernel, x.constexprs, x.spec, x.options)


def distinct(launches: Sequence[Launch]) -> list[Launch]:
    """One launch per compiled variant, in first-seen order."""
    seen: dict[tuple, Launch] = {}
    for x in launches:
        seen.setdefault(compile_key(x), x)
    return list(seen.values())


def resources_of(fn: Any, launches: Sequence[Launch], arch: int = 90) -> list[Resources]:
    """:func:`resources` of each of ``launches`` compiled from ``fn`` for ``sm_<arch>``;
    raises ValueError for an argument that cannot be typed offline, and what Triton raises."""
    if not hasattr(fn, "params"):  # an interpreted function: its callees are interpreted too
        return _in_fresh_process([(fn, launches)], arch)[0]
    return [resources(compile_launch(fn, x, arch), arch) for x in launches]


def resources_by_kernel(
    launches: Sequence[Launch], fns: Mapping[str, Any], arch: int = 90
) -> list[Resources]:
    """:func:`resources_of` for launches of several kernels (``fns``: kernel name -> the
    ``@triton.jit`` function), one batch per kernel, all in one fresh process when they are
    interpreted; results in the order of ``launches``."""
    batches = [
        (fn, [i for i, x in enumerate(launches) if x.kernel == name]) for name, fn in fns.items()
    ]
    jobs = [(fn, [launches[i] for i in idx]) for fn, idx in batches]
    if any(not hasattr(fn, "params") for fn, _ in jobs):
        results = _in_fresh_process(jobs, arch)
    else:
        results = [resources_of(fn, batch, arch) for fn, batch in jobs]
    found: dict[int, Resources] = {}
    for (_, idx), res in zip(batches, results, strict=True):
        found.update(zip(idx, res, strict=True))
    return [found[i] for i in range(len(launches))]


def _in_fresh_process(jobs: Sequence[tuple[Any, Sequence[Launch]]], arch: int) -> list:
    """The resources of each ``(interpreted kernel, launches)`` job, compiled natively in one
    fresh process (without ``TRITON_INTERPRET``)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    kernels = [
        {"module": fn.fn.__module__, "name": fn.fn.__name__, "launches": [asdict(x) for x in xs]}
        for fn, xs in jobs
    ]
    job = {"arch": arch, "kernels": kernels}
    out = subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.kernels.offline"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode:
        names = ", ".join(f"{k['module']}.{k['name']}" for k in kernels)
        raise RuntimeError(f"compiling {names} for sm_{arch} failed:\n{out.stderr[-3000:]}")
    return [[Resources(**r) for r in found] for found in json.loads(out.stdout)]


def _launch_from(d: dict) -> Launch:
    """A :class:`Launch` back from its JSON dict (lists to tuples)."""

    def tup(v: Any) -> Any:
        return tuple(tup(i) for i in v) if isinstance(v, list) else v

    return Launch(**{k: tup(v) for k, v in d.items()})


def main() -> int:
    """Compile the launches of each kernel of a JSON job on stdin; print their resources as
    JSON, one list per kernel."""
    job = json.load(sys.stdin)
    found = []
    for k in job["kernels"]:
        fn = getattr(importlib.import_module(k["module"]), k["name"])
        launches = [_launch_from(x) for x in k["launches"]]
        found.append([asdict(r) for r in resources_of(fn, launches, job["arch"])])
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
