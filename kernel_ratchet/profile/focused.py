"""A focused test for an op of ``ratchet.yaml``, with no test file to write:
``python -m kernel_ratchet.profile.focused OP [--profile PATH]`` (an op's ``test:`` command may
be just that; without ``--profile``, the ratchet.yaml found from the working directory).

It builds the op's adapter, and on each shape compares ``outputs`` with ``reference``, each
output at its own threshold; without a GPU it runs on the CPU (Triton kernels through the
Triton interpreter, plain PyTorch as it is) on the op's rehearsal shapes (``rehearse_shapes``,
else the target shapes shrunk, with the tile-crossing shapes of
:func:`~kernel_ratchet.profile.rehearsal.check_shapes`). Exit 0 when every
output passes, 1 otherwise (one line per shape either way: a shape whose call raises is a FAIL
line with the error, its traceback on stderr), 3 for a ratchet.yaml problem.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness import inplace
from kernel_ratchet.harness.adapter import load_adapter, load_shapes
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.outcome import exception_line
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.rehearsal import check_shapes


def run(op: str, start: Path) -> int:
    """Check op ``op`` of the ratchet.yaml found from ``start``; returns the exit code."""
    cuda = torch.cuda.is_available()
    if not cuda:  # a Triton kernel runs interpreted; an op of another backend ignores it
        os.environ["TRITON_INTERPRET"] = "1"
    profile = load_profile(start)
    sys.path.insert(0, str(profile.root))
    o = profile.op(op)
    shapes = load_shapes(o.shapes) if cuda else check_shapes(profile, op)
    adapter = load_adapter(o.adapter)
    failed = 0
    for shape in shapes:
        try:
            passed, line = _check(adapter, shape, "cuda" if cuda else "cpu")
        except RatchetError:
            raise
        except Exception as exc:  # a kernel that raises fails its shape; the others still run
            passed, line = False, exception_line(exc, 300)
            traceback.print_exc(limit=4, file=sys.stderr)
        # the sizes run: on a CPU the targets may be shrunk, and a GPU's line reads the same
        print(f"{'PASS' if passed else 'FAIL'} {shape.label} ({_sizes(shape)}): {line}")
        failed += not passed
    for note in dict.fromkeys(getattr(adapter, "dtype_notes", list)()):
        print(f"note: {note}")
    print(f"{len(shapes) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _sizes(shape: Any) -> str:
    """``M=48, N=48``: the sizes a shape ran with (on a CPU, maybe the targets shrunk)."""
    sizes = {"M": shape.M, "N": shape.N, "K": shape.K, "B": shape.B, **shape.params}
    skip = {"K": 0, "B": 1}
    return ", ".join(f"{k}={v}" for k, v in sizes.items() if skip.get(k) != v)


def _check(adapter: Any, shape: Any, device: str) -> tuple[bool, str]:
    """(passed, the SNR of every output, and on a failure the check's reason: a slice below its
    bar or a NaN is not in the whole-tensor SNRs) of one shape against the reference."""
    case = adapter.make_case(shape, 1234, device)
    kept = inplace.prepared(adapter, case)
    got = adapter.outputs(case)
    ref = inplace.reference(adapter, case, kept)
    if not ref:
        return (
            False,
            "the reference returned no output: nothing was checked (reference(case) "
            "returns the outputs by name)",
        )
    res = check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})
    line = ", ".join(f"{n} {v:.1f} dB" for n, v in res.snr.items())
    return res.passed, line if res.passed else f"{line} ({res.reason})"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    start = Path.cwd()
    if len(args) == 3 and args[1] == "--profile":
        args, start = args[:1], Path(args[2])
    if len(args) != 1:
        print(
            "usage: python -m kernel_ratchet.profile.focused OP [--profile PATH]", file=sys.stderr
        )
        sys.exit(2)
    sys.argv = sys.argv[:1]  # the op's code, imported next, sees no argument of ours
    try:
        sys.exit(run(args[0], start))
    except RatchetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
