"""Worker classification helpers and result records (no subprocess: see test_redteam.py)."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from kernel_ratchet.harness.anticheat import CheatDetected
from kernel_ratchet.harness.outcome import classify_exception, classify_exit
from kernel_ratchet.harness.timed_checks import derive_seed, match_outputs
from kernel_ratchet.harness.worker import CATEGORIES, WorkerResult, WorkerSpec


class CompilationError(Exception):
    """Stands in for triton.compiler.errors.CompilationError (matched by class name)."""


class UnsupportedLanguageConstruct(CompilationError):
    pass


@pytest.mark.parametrize(
    ("exc", "category"),
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"), "oom"),
        (RuntimeError("CUDA error: out of memory"), "oom"),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), "illegal_memory"),
        (RuntimeError("CUDA error: misaligned address"), "illegal_memory"),
        (UnsupportedLanguageConstruct("at 3:4: unsupported"), "compile"),
        (SyntaxError("invalid syntax"), "compile"),
        (CheatDetected("patched timer"), "cheat"),
        (ValueError("shapes do not match"), "crash"),
        (SystemExit(3), "crash"),
    ],
)
def test_exceptions_are_classified(exc, category):
    got, detail = classify_exception(exc)
    assert got == category
    assert detail and "\n" not in detail.strip()


def test_the_interpreters_numpy_error_says_what_to_install():
    from kernel_ratchet.harness.interpreter import NUMPY_SCALARS

    class InterpreterError(Exception):
        pass

    category, detail = classify_exception(InterpreterError(f"TypeError('{NUMPY_SCALARS}')"))
    assert category == "crash" and "pip install 'numpy<2.4'" in detail
    assert "numpy" not in classify_exception(InterpreterError("TypeError('other')"))[1]


def test_exit_classification_from_signal_and_log():
    assert classify_exit(-signal.SIGSEGV, "")[0] == "crash"
    assert "SIGSEGV" in classify_exit(-signal.SIGSEGV, "")[1]
    assert "OOM killer" in classify_exit(-signal.SIGKILL, "")[1]
    assert classify_exit(-signal.SIGABRT, "an illegal memory access was encountered")[0] == (
        "illegal_memory"
    )
    assert classify_exit(1, "torch.OutOfMemoryError: CUDA out of memory")[0] == "oom"
    assert "status 0" in classify_exit(0, "")[1]


def test_worker_result_validates_category_and_ok():
    assert set(CATEGORIES) == {
        "ok",
        "hang",
        "illegal_memory",
        "oom",
        "compile",
        "nan",
        "crash",
        "cheat",
        "wrong",
    }
    WorkerResult(True, "ok", "", "", {})
    with pytest.raises(ValueError):
        WorkerResult(False, "ok", "", "", {})
    with pytest.raises(ValueError):
        WorkerResult(False, "segfault", "", "", {})


def test_worker_spec_is_frozen_with_a_default_timeout():
    s = WorkerSpec("/x", "m:C", "perf_counter", {}, "cpu", True)
    assert s.timeout_s == 300.0
    with pytest.raises(AttributeError):
        s.timeout_s = 1.0  # type: ignore[misc]


def test_derived_seeds_differ_and_are_stable():
    assert derive_seed(7, 1) == derive_seed(7, 1)
    assert len({derive_seed(7, k) for k in range(20)} | {derive_seed(8, 1)}) == 21


def test_timed_outputs_map_to_reference_names():
    t = torch.zeros(1)
    ref = {"out": t, "da": t, "db": t}
    assert list(match_outputs([("0", t)], ref, "fwd")) == ["out"]
    assert list(match_outputs([("0", t), ("1", t)], ref, "bwd")) == ["da", "db"]
    assert list(match_outputs([("da", t)], ref, "bwd")) == ["da"]
    assert match_outputs([("0", t), ("1", t)], ref, "fwd") == {}


def test_the_answer_is_written_by_an_encoder_no_candidate_touched(tmp_path, monkeypatch):
    """An ``encode`` set on json's shared encoder (kept by identity, its attributes are not)
    rewrote failed verdicts as passes; the worker encodes with a fresh one."""
    import json

    from kernel_ratchet.harness import worker_main

    shared = json._default_encoder
    shared.encode = lambda o: '{"ok": true, "category": "ok"}'  # type: ignore[method-assign]
    try:
        path = tmp_path / "channel"
        with open(path, "w", encoding="utf-8") as out:
            st = os.fstat(out.fileno())
            monkeypatch.setattr(worker_main, "_CHANNEL", (st.st_dev, st.st_ino))
            worker_main._send(out, {"ok": False, "category": "wrong", "detail": "SNR 0 dB"})
        assert json.loads(path.read_text()) == {
            "ok": False,
            "category": "wrong",
            "detail": "SNR 0 dB",
        }
    finally:
        del shared.encode
