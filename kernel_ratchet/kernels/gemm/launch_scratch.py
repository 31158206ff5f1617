"""The global scratch of kernels launched directly (:mod:`.fast_launch`), and whether a launch
hook asks for Triton's own launch.

A kernel that builds TMA descriptors on the device writes them into a global scratch buffer
Triton asks an allocator for at every launch (``triton.set_allocator``; a ``torch.empty`` on the
device, a few microseconds of host time). Kernels on one stream run one after another, so a
stream's launches can share one buffer: :func:`get` keeps one per (device, stream), grown to the
largest launch seen. Under CUDA graph capture each launch gets its own from the graph's pool, as
Triton's allocator would: a graph may be replayed beside eager work on another stream.

The same holds for the fp32 slots and tile counts of a split-K launch whose tiles finish
themselves (:func:`split_slots`): the launch leaves them zero, so one zeroed pair per stream
serves its later launches, where the plain split-K zeroes an fp32 output and casts it on every
call (two launches more, and their host time).
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
#: {(device, stream): (fp32 slots, int32 counts)} of :func:`split_slots`, grown to the largest
#: launch seen.
_SLOTS: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


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


def split_slots(device: torch.device, tiles: int, tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Zeroed fp32 slots (``tiles`` of ``tile`` elements) and int32 counts (``tiles``) for a
    split-K launch on ``device``'s current stream whose tiles finish themselves
    (:func:`.kernel_tile._finish_split` leaves both zero); fresh ones under graph capture."""
    if device.type == "cuda" and _capturing():
        return _zeros(device, tiles * tile, tiles)
    key = (device, _stream(device))
    kept = _SLOTS.get(key)
    if kept is None or kept[0].numel() < tiles * tile or kept[1].numel() < tiles:
        had = (0, 0) if kept is None else (kept[0].numel(), kept[1].numel())
        kept = _zeros(device, max(tiles * tile, had[0]), max(tiles, had[1]))
        _SLOTS[key] = kept
    return kept


def _stream(device: torch.device) -> int:
    """The handle of ``device``'s current stream (0 off CUDA)."""
    return torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else 0


def _zeros(device: torch.device, slots: int, counts: int) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.zeros(slots, dtype=torch.float32, device=device),
        torch.zeros(counts, dtype=torch.int32, device=device),
    )
