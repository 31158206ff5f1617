"""Red team (CPU): cheating candidates from the public record against the harness worker.

Each candidate runs in its own worker process (Triton interpreter, tiny shape, perf_counter
engine), as in ``tests/harness/test_redteam.py``, which covers the techniques the suite already
had. Ids name the technique; the catalogue (``redteam-catalogue.md``) gives each one's source
and the reason it must be rejected for. Techniques no check rejects yet are marked with
:func:`~tests.redteam.expect.gap`, which says what detection is missing.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from kernel_ratchet.harness.worker import Worker
from tests.redteam.expect import SEED, SHAPE, cpu_spec, expect_rejected, explain

IMPORT_TIME = "tests.redteam.import_time"


@pytest.mark.parametrize(
    ("adapter", "categories", "reasons"),
    [
        pytest.param(
            "UninitReuse",
            ("wrong", "cheat", "nan"),
            ("SNR", "did not follow", "NaN"),
            id="uninitialised-output-memory",
        ),
        pytest.param("ZerosOutput", "wrong", "SNR", id="constant-zero-output"),
        pytest.param("PartialK", "wrong", "SNR", id="shrunk-problem-half-k"),
        pytest.param("SeedReplay", "wrong", "SNR", id="replayed-answer-of-a-guessed-seed"),
        pytest.param("GcScavenge", "wrong", "SNR", id="answer-scavenged-with-gc"),
        pytest.param(
            f"{IMPORT_TIME}.patch_assert_close:Candidate",
            "cheat",
            "correctness.assert_close",
            id="patched-focused-test-comparator",
        ),
        pytest.param(
            f"{IMPORT_TIME}.patch_torch_allclose:Candidate",
            "cheat",
            "torch.allclose",
            id="patched-torch-allclose",
        ),
        pytest.param(
            f"{IMPORT_TIME}.patch_reference:Candidate",
            "cheat",
            "reference",
            id="reference-replaced-at-import",
        ),
        pytest.param(
            "ProfileHookRewrite",
            "cheat",
            "profile",
            id="profile-hook-rewrites-the-reference",
        ),
        pytest.param(
            "TorchModeHijack",
            "cheat",
            "TorchFunctionMode",
            id="torch-function-mode-fakes-the-comparison",
        ),
        pytest.param(
            "ProtocolForgery",
            "cheat",
            "protocol",
            id="forged-answer-on-the-protocol-channel",
        ),
        pytest.param(
            "RawThread",
            "cheat",
            "thread",
            id="background-work-on-a-raw-thread",
        ),
        pytest.param(
            "ChildProcess",
            "cheat",
            "child process",
            id="helper-process-left-running",
        ),
        pytest.param(
            "GlobalNumericFlags",
            "cheat",
            "allow_tf32",
            id="process-wide-numeric-flags",
        ),
        pytest.param(
            "ConstantInputs",
            ("cheat", "crash"),
            "random",
            id="non-random-inputs",
        ),
    ],
)
def test_rejected_by_the_correctness_check(
    tmp_path: Path, adapter: str, categories: str | tuple[str, ...], reasons: str | tuple[str, ...]
) -> None:
    with Worker(cpu_spec(adapter), tmp_path / "w.log") as w:
        expect_rejected(w.check(SHAPE, SEED), categories, reasons)


@pytest.mark.parametrize(
    ("adapter", "reason"),
    [
        pytest.param("CorrectThenWrong", "spot check", id="correct-at-first-check-wrong-later"),
        pytest.param("CallerInspection", "spot check", id="honest-only-when-the-checker-calls"),
        pytest.param(
            "PoisonAwareSkip",
            "same output",
            id="batch-and-skip-until-poisoned",
        ),
    ],
)
def test_passes_the_check_but_is_rejected_while_timing(
    tmp_path: Path, adapter: str, reason: str
) -> None:
    with Worker(cpu_spec(adapter), tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)  # the trick is built to survive the separate check
        expect_rejected(w.time(SHAPE, SEED + 1, "fwd"), "cheat", reason)


_START_UP_HOOK = """
    import os
    import time

    _real = time.perf_counter
    _t0 = _real()


    def perf_counter():
        return _t0 + (_real() - _t0) / 10.0


    time.perf_counter = perf_counter
    with open(os.environ["REDTEAM_HOOK_MARK"], "a") as f:
        f.write("ran\\n")
"""


def test_a_start_up_hook_outside_the_project_cannot_slow_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit outside the repository (a ``sitecustomize.py`` on the path) is invisible to the
    scope check; either it must not run in the worker, or the worker must notice its effect."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(textwrap.dedent(_START_UP_HOOK))
    mark = tmp_path / "hook-ran"
    monkeypatch.setenv("REDTEAM_HOOK_MARK", str(mark))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")])
    )
    with Worker(cpu_spec("TinyGemm"), tmp_path / "w.log") as w:
        r = w.time(SHAPE, SEED, "fwd")
    if mark.exists():  # the hook ran in the worker: its effect must be rejected
        expect_rejected(r, "cheat", "perf_counter")
