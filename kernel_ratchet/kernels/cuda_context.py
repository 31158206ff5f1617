"""The CUDA context a host-side TMA descriptor is encoded in.

Triton encodes a Gluon kernel's host-side tensor descriptors (``cuTensorMapEncodeTiled``) when
it launches the kernel, before anything of the launch makes the device's context current on the
calling thread. The autograd engine runs a backward on a thread of its own: where a Gluon GEMM
is the first CUDA work there (the first backward of a process, its gradient already
contiguous), the encode fails with "Failed to create tensor map descriptor: invalid device
context". The launchers of the Gluon kernels call :func:`make_current` first.
"""

from __future__ import annotations

import threading

import torch

_THREAD = threading.local()


def make_current(device: torch.device) -> None:
    """Make ``device``'s CUDA context current on this thread: a stream query, which the CUDA
    runtime serves in that context, once per thread and device (nothing for another device
    type: the launchers' dry runs and recorders on the CPU)."""
    if device.type == "cuda" and getattr(_THREAD, "device", None) != device:
        torch.cuda.current_stream(device).query()
        _THREAD.device = device
