"""The global scratch of kernels launched directly (:mod:`.fast_launch`), and whether a launch
hook asks for Triton's own launch.

A kernel that builds TMA descriptors on the device writes them into a global scratch buffer
Triton asks an allocator for at every launch (``triton.set_allocator``; a ``torch.empty`` on the
device, a few microseconds of host time). Kernels on one stream run one after another, so a
stream's launches can share one buffer: :func:`get` keeps one per (device, stream), grown to the
largest launch seen. Under CUDA graph capture each launch gets its own from the graph's pool, as
Triton's allocator would: a graph may be replayed beside eager work on another stream.
"""

from __future__ import annotations

import torch

try:
    from triton import knobs
except ImportError:  # a Triton without launch hooks' knobs: its own launch path everywhere
    knobs = None

#: The alignment the caching allocator's blocks start on, so every buffer here has.
ALIGN = 512

_KEPT: dict[tuple[int, int], torch.Tensor] = {}


def current() -> tuple[int, int]:
    """The current CUDA device and its current stream's handle, as Triton launches on them."""
    device = torch._C._cuda_getDevice()
    return device, torch._C._cuda_getCurrentRawStream(device)


def _capturing() -> bool:
    return torch._C._cuda_isCurrentStreamCapturing()


def get(device: int, stream: int, size: int) -> torch.Tensor | None:
    """A scratch buffer of at least ``size`` bytes for a launch on ``stream`` of ``device``
    (None for a kernel that needs none); ``align`` at most :data:`ALIGN`."""
    if size <= 0:
        return None
    if _capturing():
        return _new(size, device)
    buf = _KEPT.get((device, stream))
    if buf is None or buf.numel() < size:
        buf = _new(max(size, 2 * (0 if buf is None else buf.numel())), device)
        _KEPT[(device, stream)] = buf
    return buf


def _new(size: int, device: int) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device=torch.device("cuda", device))


def allocate(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Triton's allocator of a launch's global scratch (``triton.set_allocator``): a new
    buffer on the current device, from the stream's pool."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def hooked() -> bool:
    """Whether a launch hook is installed (a profiler's): then Triton launches, and calls it."""
    if knobs is None:
        return True
    enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    return bool(getattr(enter, "calls", enter)) or bool(getattr(leave, "calls", leave))
