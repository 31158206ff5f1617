"""Process-wide state of a worker that a candidate could change to fake a check or a time.

The correctness checker runs in the candidate's own process, so anything process-wide the
candidate can reach is part of what the worker must verify. This module captures that state
when the worker starts (before the project is imported) and reports what changed since:

* **hooks**: ``sys.setprofile`` / ``sys.settrace`` functions (and ``threading``'s copies of
  them): a hook can rewrite the checker's local variables when a comparison starts;
* **torch modes**: an entered ``TorchFunctionMode`` or ``TorchDispatchMode`` intercepts every
  torch operation the checker runs (``out - ref`` can be made to read zero);
* **numeric flags**: TF32 switches, float32 matmul precision, deterministic and benchmark
  flags, the thread count, the default dtype: a change makes fp32 work faster *and* degrades a
  reference computed in the same process;
* **OS threads**: threads started below ``threading`` (``_thread.start_new_thread``, C code)
  that do work off the timed path; threads that a library names (CUDA's, torch's pools) and
  threads alive after the warm-up at capture are not the candidate's;
* **child processes** left running (work, or a load on the other side of a paired A/B);
* **timers**: ``time``'s clocks must be the C builtins when the worker starts, so a start-up
  hook (``sitecustomize``, a ``.pth`` file) cannot install a slow clock before the snapshot.

Every check returns readable findings; :class:`~kernel_ratchet.harness.anticheat.Sentinel`
turns them into ``CheatDetected``. Limit: all of this runs in the candidate's process; native
code (or Python reading the harness's frames) can still hide from it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch

from kernel_ratchet.harness.strays import children, state_and_cmdline

#: The clocks of ``time`` that timing engines read; each must be the C builtin.
TIMERS: tuple[str, ...] = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time")

#: Child processes a library may keep (torch.compile's compile workers), by command line.
ALLOWED_CHILDREN: tuple[str, ...] = ("torch._inductor.compile_worker",)


def _flag_readers() -> dict[str, Callable[[], object]]:
    cuda_matmul = torch.backends.cuda.matmul
    cudnn = torch.backends.cudnn
    return {
        "torch.backends.cuda.matmul.allow_tf32": lambda: cuda_matmul.allow_tf32,
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": (
            lambda: cuda_matmul.allow_fp16_reduced_precision_reduction
        ),
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": (
            lambda: cuda_matmul.allow_bf16_reduced_precision_reduction
        ),
        "torch.backends.cudnn.allow_tf32": lambda: cudnn.allow_tf32,
        "torch.backends.cudnn.benchmark": lambda: cudnn.benchmark,
        "torch.backends.cudnn.deterministic": lambda: cudnn.deterministic,
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
        "torch.are_deterministic_algorithms_enabled()": (
            torch.are_deterministic_algorithms_enabled
        ),
        "torch.get_num_threads()": torch.get_num_threads,
        "torch.get_default_dtype()": torch.get_default_dtype,
    }


def numeric_flags() -> dict[str, object]:
    """The current value of every process-wide numeric switch (``"unavailable"`` where this
    build of torch cannot read one)."""
    values: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, read in _flag_readers().items():
            try:
                values[name] = read()
            except Exception:  # noqa: BLE001 -- a build without the switch
                values[name] = "unavailable"
    return values


@contextlib.contextmanager
def precise_numerics() -> Iterator[None]:
    """Compute a reference at full fp32 precision (no TF32, no reduced-precision reductions),
    whatever the project set; its flags come back after."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    names = ("allow_tf32", "allow_fp16_reduced_precision_reduction")
    names += ("allow_bf16_reduced_precision_reduction",)
    kept = [getattr(matmul, n) for n in names], cudnn.allow_tf32
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    for n in names:
        if getattr(matmul, n):
            setattr(matmul, n, False)
    cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)  # sets allow_tf32 with it
        for n, v in zip(names, kept[0], strict=True):
            if getattr(matmul, n) != v:  # a legacy write beside the new API reads as "mixed"
                setattr(matmul, n, v)
        cudnn.allow_tf32 = kept[1]


_TORCH_DIR = os.path.dirname(torch.__file__)

#: The aten operators a comparison and a typical reference run; their kernels for the keys of
#: :data:`_KERNEL_KEYS` are read from the dispatcher itself before every comparison.
DISPATCH_OPS = tuple(
    f"aten::{op}"
    for op in (
        *("mm", "bmm", "addmm", "matmul", "mv", "dot", "linear", "sub.Tensor", "add.Tensor"),
        *("mul.Tensor", "div.Tensor", "sum", "sum.dim_IntList", "mean.dim", "pow.Tensor_Scalar"),
        *("sqrt", "abs", "square", "_to_copy", "copy_", "clone", "isfinite", "isnan"),
        *("eq.Tensor", "all", "any", "max", "min", "linalg_vector_norm", "exp", "log"),
        *("softmax.int", "_softmax", "rsqrt"),
    )
)
_KERNEL_KEYS = frozenset(
    {"CPU", "CUDA", "AutogradCPU", "AutogradCUDA", "Autograd", "AutogradOther"}
    | {"CompositeImplicitAutograd", "CompositeExplicitAutograd"}
)


def dispatch_table() -> dict[str, tuple[str, ...]]:
    """Per operator of :data:`DISPATCH_OPS`, its registrations for the kernel keys, as the
    dispatcher lists them."""
    out = {}
    for op in DISPATCH_OPS:
        try:
            lines = torch._C._dispatch_dump(op).splitlines()
        except RuntimeError:  # an operator this build does not have
            continue
        out[op] = tuple(ln for ln in lines if ln.split(":", 1)[0].split(" ")[0] in _KERNEL_KEYS)
    return out


def _hooks() -> dict[str, Any]:
    found: dict[str, Any] = {
        "sys.setprofile": sys.getprofile(),
        "sys.settrace": sys.gettrace(),
        "threading.setprofile": getattr(threading, "_profile_hook", None),
        "threading.settrace": getattr(threading, "_trace_hook", None),
    }
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool in range(6):
            found[f"sys.monitoring tool {tool}"] = monitoring.get_tool(tool)
    # a timer signal's handler runs Python after the call returned, inside the checks
    for name in ("SIGALRM", "SIGVTALRM", "SIGPROF"):
        if hasattr(signal, name):
            found[f"signal.signal({name})"] = signal.getsignal(getattr(signal, name))
    return found


def _task_ids() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:  # no /proc: the Python-level thread check still runs
        return set()


def _comm(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def warm_torch() -> None:
    """Start the thread pools torch creates lazily (intra-op, BLAS), and numpy's BLAS pool
    (:func:`warm_numpy`), so that they exist before the OS-thread baseline is taken."""
    x = torch.ones(256, 256)
    (x @ x).sum()
    torch.ones(1 << 17).add_(1.0).sum()
    warm_numpy()


def warm_numpy() -> None:
    """Start numpy's BLAS threads. In a worker forked from the zygote they do not exist until
    the first large matrix product, which Triton's interpreter makes for a ``tl.dot`` of a
    128-wide tile: a candidate whose autotuner tried such a tile first was taken for leaving
    a thread running."""
    try:
        import numpy as np
    except ImportError:
        return
    a = np.ones((256, 256), dtype=np.float32)
    (a @ a).sum()


@dataclass(frozen=True)
class ProcessState:
    """Process-wide state captured when the worker starts."""

    hooks: tuple[tuple[str, Any], ...]
    flags: tuple[tuple[str, object], ...]
    os_threads: frozenset[int]
    main_comm: str
    kernels: frozenset[str] = frozenset()  # torch.library's registered kernels at start
    dispatch: tuple[tuple[str, tuple[str, ...]], ...] = ()  # :func:`dispatch_table` at start

    @classmethod
    def capture(cls) -> ProcessState:
        """Snapshot hooks, numeric flags and OS threads (call after :func:`warm_torch`)."""
        return cls(
            tuple(_hooks().items()),
            tuple(numeric_flags().items()),
            frozenset(_task_ids()),
            _comm("/proc/self/comm"),
            frozenset(torch.library._impls),
            tuple(dispatch_table().items()),
        )

    def changed_dispatch(self) -> list[str]:
        """The operators of :data:`DISPATCH_OPS` whose kernels changed since start (a kernel
        registered below ``torch.library``, or one whose record was removed from it)."""
        now = dispatch_table()
        return [op for op, lines in self.dispatch if now.get(op) != lines]

    def foreign_kernels(self, judged: set[str]) -> list[str]:
        """Kernels of torch's own operators (``aten``) registered since start from
        outside torch (``torch.library.Library("aten", "IMPL").impl("mm", ...)``): the
        reference's operations would run them. ``judged`` keeps the entries found to be
        torch's own (its lazy registrations), so each is read once."""
        out = []
        for entry in sorted(set(torch.library._impls) - self.kernels - judged):
            ns, op, key = entry.split("/", 2)
            lines = torch._C._dispatch_dump(f"{ns}::{op}").splitlines() if ns == "aten" else []
            sites = [
                ln.split("registered at ", 1)[1].split(" :: ")[0]
                for ln in lines
                if ln.split(":", 1)[0].split(" ")[0] == key and "registered at " in ln
            ]
            if sites and not sites[0].startswith(_TORCH_DIR):
                out.append(f"{ns}::{op} for {key}, registered at {sites[0]}")
            else:  # torch's own (its lazy registrations), or no kernel of aten's
                judged.add(entry)
        return out

    def as_imported(self) -> ProcessState:
        """This snapshot with the OS threads alive now and the numeric flags set now as its
        own (taken again once the project is imported: the libraries it loads may start native
        pools, e.g. OpenMP or BLAS, sized by the machine's cores, and a project may allow TF32
        as it loads; references are computed under :func:`precise_numerics` whatever it set)."""
        flags = tuple(numeric_flags().items())
        return replace(self, os_threads=frozenset(_task_ids()), flags=flags)

    def changed_hooks(self) -> list[str]:
        """Profile/trace/monitoring hooks that are not the ones of the snapshot."""
        before = dict(self.hooks)
        return [name for name, fn in _hooks().items() if fn is not before.get(name)]

    def changed_flags(self) -> list[str]:
        """``name: before -> now`` for every numeric switch that changed."""
        before = dict(self.flags)
        return [
            f"{name}: {before.get(name)!r} -> {now!r}"
            for name, now in numeric_flags().items()
            if now != before.get(name)
        ]

    def new_os_threads(self) -> list[str]:
        """OS threads that are neither in the snapshot, nor Python threads (checked by name
        elsewhere), nor named by a library (their name differs from the process's)."""
        python = {t.native_id for t in threading.enumerate()}
        found = []
        for tid in sorted(_task_ids() - self.os_threads - python):
            comm = _comm(f"/proc/self/task/{tid}/comm")
            if comm and comm == self.main_comm:
                found.append(f"tid {tid}")
        return found


def active_modes() -> list[str]:
    """Entered torch function/dispatch modes (a device context, ``with torch.device(...)``,
    is not one: it only picks the device of new tensors)."""
    from torch.utils._device import DeviceContext
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    modes = [
        f"TorchFunctionMode {type(m).__module__}.{type(m).__qualname__}"
        for m in torch.overrides._get_current_function_mode_stack()
        if type(m) is not DeviceContext
    ]
    modes += [
        f"TorchDispatchMode {type(m).__module__}.{type(m).__qualname__}"
        for m in _get_current_dispatch_mode_stack()
    ]
    return modes


def _library_worker(pid: int) -> bool:
    """Whether ``pid`` runs a library's worker of :data:`ALLOWED_CHILDREN`: this interpreter
    on the module's own file under torch, or ``-m`` the module (an argument merely naming it
    is not enough), in this worker's process group (a library's pool does not leave it; a
    child that does escapes the stop of the idle side)."""
    try:
        if os.getpgid(pid) != os.getpgid(0):
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0")]
    except OSError:
        return False
    for module in ALLOWED_CHILDREN:
        if argv[1:3] == ["-m", module]:
            return True
        where = os.path.join(os.path.dirname(_TORCH_DIR), *module.split("."))
        if len(argv) > 1 and os.path.realpath(argv[1]).startswith(os.path.realpath(where)):
            return True
    return False


def child_processes() -> list[str]:
    """Running (not exited) child processes of this worker, except allowed library workers."""
    found = []
    for pid in sorted(children()):
        state, cmd = state_and_cmdline(pid)
        if state in ("Z", "X", "gone") or _library_worker(pid):
            continue
        found.append(f"pid {pid} ({cmd[:80]})")
    return found


def replaced_timers() -> list[str]:
    """Clocks of ``time`` that are not the C builtins of the module (a start-up hook ran)."""
    bad = []
    for name in TIMERS:
        fn = getattr(time, name, None)
        if not (isinstance(fn, types.BuiltinFunctionType) and fn.__self__ is time):
            bad.append(f"time.{name}")
    return bad
