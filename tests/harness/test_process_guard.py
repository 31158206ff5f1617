"""Process-wide state the Sentinel verifies: hooks, torch modes, numeric flags, threads,
children, timers; and the input-entropy rule of the check (in this process, no worker)."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from kernel_ratchet.harness import input_entropy, process_guard
from kernel_ratchet.harness.anticheat import CheatDetected, Sentinel


def test_a_profile_hook_is_a_changed_hook() -> None:
    state = process_guard.ProcessState.capture()
    old = sys.getprofile()
    sys.setprofile(lambda *a: None)
    try:
        assert "sys.setprofile" in state.changed_hooks()
    finally:
        sys.setprofile(old)
    assert "sys.setprofile" not in state.changed_hooks()


def test_a_changed_numeric_flag_is_named() -> None:
    state = process_guard.ProcessState.capture()
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium" if before != "medium" else "highest")
    try:
        assert any("float32_matmul_precision" in c for c in state.changed_flags())
    finally:
        torch.set_float32_matmul_precision(before)
    assert state.changed_flags() == []


def test_an_entered_torch_function_mode_is_active() -> None:
    class Mode(torch.overrides.TorchFunctionMode):
        pass

    assert process_guard.active_modes() == []
    with Mode():
        assert any("TorchFunctionMode" in m for m in process_guard.active_modes())
    with torch.device("cpu"):
        assert process_guard.active_modes() == []


def test_a_child_process_is_found_until_it_exits() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert any(str(child.pid) in c for c in process_guard.child_processes())
    finally:
        child.kill()
        child.wait()
    assert not any(str(child.pid) in c for c in process_guard.child_processes())


def test_the_clocks_are_the_c_builtins_until_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    assert process_guard.replaced_timers() == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert process_guard.replaced_timers() == ["time.perf_counter"]


def test_the_sentinel_names_a_patched_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = Sentinel.capture()
    sentinel.verify()
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    with pytest.raises(CheatDetected, match="torch.allclose"):
        sentinel.verify()


def test_a_method_added_to_tensor_is_a_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = Sentinel.capture()
    monkeypatch.setattr(torch.Tensor, "__sub__", lambda a, b: a, raising=False)
    with pytest.raises(CheatDetected, match="__sub__"):
        sentinel.verify()


@pytest.mark.parametrize(
    ("owner", "name", "label"),
    [
        (random.Random, "sample", "random.Random.sample"),  # the spot checks' draw, once
        (json, "dumps", "json.dumps"),  # the worker's answer to the parent
        (os, "urandom", "os.urandom"),  # the spot checks' draw now
        (torch.Tensor, "__matmul__", "torch.Tensor.__matmul__"),  # shadows TensorBase's
        (torch, "randn", "torch.randn"),  # every fresh input
    ],
)
def test_the_library_surface_is_watched(monkeypatch, owner, name, label) -> None:
    sentinel = Sentinel.capture()
    monkeypatch.setattr(owner, name, lambda *a, **k: None, raising=False)
    with pytest.raises(CheatDetected, match=re.escape(label)):
        sentinel.verify()


def test_new_code_in_a_kept_function_is_a_patch_and_is_put_back() -> None:
    from kernel_ratchet.harness import correctness

    sentinel = Sentinel.capture((correctness,))
    code = correctness.snr_db.__code__
    correctness.snr_db.__code__ = (lambda out, ref: float("inf")).__code__
    try:
        with pytest.raises(CheatDetected, match="correctness.snr_db"):
            sentinel.verify()
        sentinel.restore()
        assert correctness.snr_db.__code__ is code
        sentinel.verify()
    finally:
        correctness.snr_db.__code__ = code


def test_torchs_own_wrapper_of_a_function_is_not_a_patch(monkeypatch) -> None:
    """``import torch._dynamo`` wraps ``torch.manual_seed`` (functools.wraps, in torch's own
    files): a project that compiles is not a cheat. The same wrapper from elsewhere is."""
    sentinel = Sentinel.capture()
    original = torch.manual_seed
    from torch._compile import _disable_dynamo

    monkeypatch.setattr(torch, "manual_seed", _disable_dynamo(original))
    sentinel.verify()
    monkeypatch.setattr(torch, "manual_seed", functools.wraps(original)(lambda s: None))
    with pytest.raises(CheatDetected, match="torch.manual_seed"):
        sentinel.verify()


def test_a_python_thread_is_not_reported_twice_as_an_os_thread() -> None:
    state = process_guard.ProcessState.capture()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="kr-test")
    t.start()
    try:
        assert state.new_os_threads() == []
    finally:
        stop.set()
        t.join()


def test_constant_inputs_are_low_entropy_and_a_small_constant_is_allowed() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 32, generator=g)
    assert input_entropy.low_entropy_inputs([("x", x)]) is None
    assert input_entropy.low_entropy_inputs([("x", x), ("w", torch.ones(32))]) is None
    assert input_entropy.low_entropy_inputs([("x", torch.ones(64, 32))]) == ["x"]
    rows = torch.randn(1, 32, generator=g).expand(64, 32).contiguous()
    assert input_entropy.low_entropy_inputs([("x", rows)]) == ["x"]
    assert "random" in input_entropy.describe(["x"])
    # one random row expanded with stride 0 is a layout ('layout=broadcast'), not a constant
    assert input_entropy.low_entropy_inputs([("x", rows[:1].expand(64, 32))]) is None
    assert input_entropy.low_entropy_inputs([("dy", torch.randn(1).expand(64))]) is None


def test_references_run_at_full_precision_whatever_the_project_set():
    import torch

    from kernel_ratchet.harness.process_guard import numeric_flags, precise_numerics

    matmul = torch.backends.cuda.matmul
    before = numeric_flags()
    try:
        torch.set_float32_matmul_precision("medium")
        matmul.allow_fp16_reduced_precision_reduction = True
        torch.backends.cudnn.allow_tf32 = True
        project = numeric_flags()
        with precise_numerics():
            assert torch.get_float32_matmul_precision() == "highest"
            assert not matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
            assert not matmul.allow_fp16_reduced_precision_reduction
            assert not matmul.allow_bf16_reduced_precision_reduction
        assert numeric_flags() == project  # the project's own settings come back
    finally:
        torch.set_float32_matmul_precision(str(before["torch.get_float32_matmul_precision()"]))
        matmul.allow_tf32 = bool(before["torch.backends.cuda.matmul.allow_tf32"])
        torch.backends.cudnn.allow_tf32 = bool(before["torch.backends.cudnn.allow_tf32"])
        matmul.allow_fp16_reduced_precision_reduction = bool(
            before["torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction"]
        )


def test_a_child_that_only_names_an_allowed_library_is_not_its_worker():
    import subprocess
    import sys

    from kernel_ratchet.harness.process_guard import _library_worker

    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "torch._inductor.compile_worker"],
        stdin=subprocess.PIPE,
    )
    try:
        assert not _library_worker(child.pid)
    finally:
        child.communicate(b"", timeout=30)


def test_a_library_worker_outside_the_process_group_is_not_allowed(tmp_path):
    """``-m torch._inductor.compile_worker`` started in a group of its own (where the stop of
    the idle side would miss it) is not a library's worker; in the worker's group it is."""
    from kernel_ratchet.harness.process_guard import _library_worker

    main = tmp_path / "torch" / "_inductor" / "compile_worker" / "__main__.py"
    main.parent.mkdir(parents=True)
    for pkg in (main.parents[2], main.parents[1], main.parent):
        (pkg / "__init__.py").write_text("")
    main.write_text("import sys\nsys.stdin.read()\n")  # a stand-in of the same argv
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for own_group in (False, True):
        child = subprocess.Popen(
            [sys.executable, "-m", "torch._inductor.compile_worker"],
            stdin=subprocess.PIPE,
            env=env,
            start_new_session=own_group,
        )
        try:
            for _ in range(500):  # until the new process shows its own command line
                if b"compile_worker" in Path(f"/proc/{child.pid}/cmdline").read_bytes():
                    break
                time.sleep(0.01)
            assert _library_worker(child.pid) is not own_group
        finally:
            child.communicate(b"", timeout=30)


def test_the_libraries_a_reference_holds_are_kept_from_before_the_candidate(monkeypatch) -> None:
    """A reference written with numpy: a kernel that sets np.sqrt to a constant at its import
    made the reference agree with a wrong output (accepted at 7.7x before this check)."""
    import types

    import numpy as np

    reference = types.ModuleType("ref_with_numpy")
    reference.np = np
    reference.torch = torch  # torch is kept from the start, not again here
    sentinel = Sentinel.capture()
    sentinel.keep_libraries(reference)
    sentinel.verify()
    monkeypatch.setattr(np.linalg, "norm", lambda *a, **k: 1.0)  # a loaded submodule too
    with pytest.raises(CheatDetected, match=r"numpy\.linalg\.norm"):
        sentinel.verify()
