"""`ratchet new-op --backend`: an op that is not Triton is written with its own backend and
language, and the texts new-op writes say where its check runs on that backend."""

from __future__ import annotations

import pytest
import yaml

from kernel_ratchet.profile.focused import run as focused
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.schema import BACKENDS
from tests.cli_inprocess import run_cli

KERNEL = """\
import torch


def rms(x):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)
"""

FLAGS = (
    "new-op",
    "rms",
    "--function",
    "plain:rms",
    "--reference",
    "plain:rms",
    "--input",
    "x=[M, N] float32",
    "--shape",
    "wide:M=4096,N=1000",
)


@pytest.fixture
def proj(module_project):
    return module_project("plain", KERNEL)


def _op(proj) -> dict:
    return yaml.safe_load((proj / "ratchet.yaml").read_text())["ops"]["rms"]


def test_a_plain_pytorch_op_is_written_as_torch_without_triton_words(proj, monkeypatch, capsys):
    code, out = run_cli(capsys, monkeypatch, *FLAGS, "--backend", "torch")
    assert code == 0, out
    op = _op(proj)
    assert (op["backend"], op["lang"]) == ("TORCH", "python")
    test = (proj / "tests" / "test_rms_focused.py").read_text()
    assert "Triton" not in test and "plain PyTorch on the CPU" in test
    assert "Triton" not in out and "ratchet run --rehearse --op rms" in out
    assert focused("rms", proj) == 0  # what the scaffolded test asserts


def test_a_compiled_backend_is_written_with_its_rebuild_and_a_gpu_check(proj, monkeypatch, capsys):
    flags = (*FLAGS, "--backend", "CUDA", "--rebuild", "make -C csrc")
    code, out = run_cli(capsys, monkeypatch, *flags)
    assert code == 0, out
    prof = load_profile(proj / "ratchet.yaml").op("rms")
    assert (prof.backend, prof.lang, prof.rebuild) == ("CUDA", "cuda", "make -C csrc")
    test = (proj / "tests" / "test_rms_focused.py").read_text()
    assert "Triton" not in test and "CUDA kernels do not run on the CPU" in test
    assert "--rehearse" not in out and "on a GPU machine" in out


def test_the_default_backend_is_triton_checked_in_its_interpreter(proj, monkeypatch, capsys):
    code, out = run_cli(capsys, monkeypatch, *FLAGS, "--lang", "triton-3")
    assert code == 0, out
    assert (_op(proj)["backend"], _op(proj)["lang"]) == ("TRITON", "triton-3")
    assert "the Triton interpreter" in (proj / "tests" / "test_rms_focused.py").read_text()


def test_an_unknown_backend_is_a_usage_error_naming_the_accepted_ones(proj, monkeypatch, capsys):
    code, out = run_cli(capsys, monkeypatch, *FLAGS, "--backend", "pytorch")
    assert code == 2 and "--backend 'pytorch' is not a backend" in out
    assert all(name in out for name in BACKENDS)
    assert not (proj / "ratchet.yaml").exists() and not (proj / "tests").exists()


def test_a_compiled_backend_without_rebuild_names_the_flag_and_writes_nothing(
    proj, monkeypatch, capsys
):
    code, out = run_cli(capsys, monkeypatch, *FLAGS, "--backend", "hip")
    assert code == 2 and "--backend HIP is compiled" in out and "--rebuild CMD" in out
    assert not (proj / "ratchet.yaml").exists() and not (proj / "tests").exists()


def test_a_new_profile_says_how_its_package_imports_with_or_without_packaging(
    proj, monkeypatch, capsys
):
    """Without a packaging file there is nothing to pip-install: the root goes on the path."""
    code, out = run_cli(capsys, monkeypatch, *FLAGS, "--backend", "torch")
    assert code == 0, out
    assert load_profile(proj / "ratchet.yaml").install == "export PYTHONPATH=$PWD"
    (proj / "ratchet.yaml").unlink()
    (proj / "pyproject.toml").write_text("[project]\nname = 'plain'\n")
    code, out = run_cli(capsys, monkeypatch, *FLAGS, "--backend", "torch", "--no-test-file")
    assert code == 0, out
    assert load_profile(proj / "ratchet.yaml").install == "pip install -e ."
