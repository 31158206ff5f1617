"""Test set-up shared by the whole suite.

Without a CUDA GPU, Triton kernels run through the interpreter (TRITON_INTERPRET=1, set before
any kernel module is imported) on CPU tensors, and tests marked ``gpu`` are skipped. On the H200
the same suite runs the real kernels; run ``pytest -m gpu`` there before resolving kernel work.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from pathlib import Path

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # CPU tensors here are tiny: intra-op threads gain nothing, and with pytest-xdist on every
    # core each test's own child processes (workers, focused tests) would oversubscribe them
    # (one thread each cut a whole-campaign test's CPU time by 13% on 2 cores). Children inherit
    # the variable; this process is already imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")


@pytest.fixture(autouse=True)
def _forget_project_modules(tmp_path_factory):
    """Tests build their own copies of the example projects, and some import them in this
    process (an in-process CLI call, an adapter load): a module loaded from one copy must not
    answer the next test's import of the same name, whose package path would point at the
    other copy (different files, or removed). After each test, the modules loaded from a test
    directory or from ``examples/`` are forgotten."""
    yield
    roots = (str(tmp_path_factory.getbasetemp()), EXAMPLES)
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])), "")
        if isinstance(where, str) and where.startswith(roots):
            del sys.modules[name]


def pytest_collection_modifyitems(config, items):
    # The tests marked slow (whole campaigns, subprocess-heavy flows; up to a minute and more on
    # 2 cores) run first, so pytest-xdist's workers end on short tests rather than one worker
    # finishing a long one alone. Stable: the order within each kind is kept.
    items.sort(key=lambda item: "slow" not in item.keywords)
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200 with `pytest -m gpu`)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _child_pytests_skip_plugin_autoload():
    """The example projects' focused tests (``python -m pytest tests/test_kernel.py``, run by
    every round of a campaign a test drives) need no third-party pytest plugin, and importing
    the environment's (hypothesis, anyio, benchmark, xdist) costs a second or more per run.
    Set in the process that runs the tests, after its own plugins loaded, so child processes
    inherit it and pytest-xdist's controller and workers are untouched. kernel-ratchet's own
    plugin (what a campaign's focused test gets where it runs in the interpreter) is named,
    as autoloading would have loaded it."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["PYTEST_PLUGINS"] = "kernel_ratchet.harness.interpreter_plugin"


def _needs_the_gpu_alone(request) -> bool:
    return "gpu_memory" in request.keywords or "gpu_alone" in request.keywords


@pytest.fixture(autouse=True)
def _share_the_gpu(request):
    """A GPU test lets go of what a failure's frames held when it ends (:mod:`tests.gpu_share`),
    so one failed large case does not starve the tests after it. Under several pytest-xdist
    workers it also takes its turn on the GPU (exclusive for ``gpu_memory`` and ``gpu_alone``
    tests: no other GPU test runs meanwhile) and returns its worker's cached memory. No GPU:
    nothing to do."""
    if not HAS_CUDA or "gpu" not in request.keywords:
        yield
        return
    from tests.gpu_share import gpu_turn, lock_path, release_failed_frames

    turn = contextlib.nullcontext()
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        run_id = getattr(request.config, "workerinput", {}).get("testrunuid", "local")
        turn = gpu_turn(lock_path(run_id), exclusive=_needs_the_gpu_alone(request))
    with turn:
        try:
            yield
        finally:
            if release_failed_frames():
                gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


@pytest.fixture
def device() -> str:
    """'cuda' on a GPU machine, else 'cpu' (kernels then run in the Triton interpreter)."""
    return "cuda" if HAS_CUDA else "cpu"
