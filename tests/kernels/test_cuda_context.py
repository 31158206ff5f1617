"""The Gluon launchers make the device's CUDA context current on the calling thread before
Triton encodes their host-side TMA descriptors: the autograd engine's own thread may have done
no CUDA work yet (``pytest -m gpu`` runs the first backward of fresh processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from kernel_ratchet.kernels import cuda_context

REPO = Path(__file__).resolve().parents[2]


def test_a_thread_queries_a_stream_once_per_device_and_a_cpu_device_not_at_all(monkeypatch):
    queried: list[tuple[str, object]] = []

    class Stream:
        def __init__(self, device):
            self.device = device

        def query(self):
            queried.append((threading.current_thread().name, self.device))
            return True

    monkeypatch.setattr(cuda_context.torch.cuda, "current_stream", Stream)
    gpu0, gpu1 = torch.device("cuda", 0), torch.device("cuda", 1)

    def work():
        for d in (gpu0, gpu0, torch.device("cpu"), gpu1, gpu1, gpu0):
            cuda_context.make_current(d)

    for name in ("first", "second"):  # each thread its own context binding
        t = threading.Thread(target=work, name=name)
        t.start()
        t.join()
    per_thread = [(gpu0,), (gpu1,), (gpu0,)]  # again after another device became current
    assert queried == [(n, *d) for n in ("first", "second") for d in per_thread]


_FIRST_BACKWARD = {
    "dense": """
import torch
from kernel_ratchet.kernels.gemm.launch import linear_gemm
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
b = torch.randn(6144, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
linear_gemm(a, b).backward(torch.randn(4096, 6144, device="cuda", dtype=torch.bfloat16))
torch.cuda.synchronize()
""",
    "grouped": """
import torch
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_gemm
G, N, K, rows = 8, 2048, 1024, 512
x = torch.randn(G * rows, K, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16, requires_grad=True)
lens = torch.full((G,), rows, device="cuda", dtype=torch.int32)
grouped_gemm(x, w, lens).backward(torch.randn(G * rows, N, device="cuda", dtype=torch.bfloat16))
torch.cuda.synchronize()
""",
}


@pytest.mark.gpu
@pytest.mark.parametrize("path", sorted(_FIRST_BACKWARD))
def test_the_first_backward_of_a_process_runs_the_gluon_kernels_on_gpu(path):
    """A contiguous gradient and nothing before the backward on its thread: the dense dgrad
    (the 16-bit WS kernel) or the grouped one is the thread's first CUDA work."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_BACKWARD[path]],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
