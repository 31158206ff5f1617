"""Launch of the stream-K kernel (:mod:`.kernel_streamk`) with buffers kept per stream.

Each program of a stream-K launch may hand one partial tile to a finisher through an fp32
workspace slot and a flag; the finisher resets the flag once it has added the partial, so a
launch leaves every flag zero. The workspace and the flags are therefore allocated (and the
flags zeroed) once per device and stream, not per call: launches on one stream run one after
another, so they can share them. The kernel goes through :mod:`.fast_launch` on the GPU.

Under CUDA-graph capture a call takes fresh buffers from the graph's pool (the flags' zeroing
captured with it) and keeps nothing: a graph replays on whatever stream it is launched on,
possibly beside eager calls or other graphs, so it must own its buffers, and a cached buffer
grown or replaced later must never be one a captured graph still writes to.
"""

from __future__ import annotations

from typing import Any

import torch

from kernel_ratchet.kernels.gemm import fast_launch
from kernel_ratchet.kernels.gemm.kernel_streamk import _gemm_streamk_kernel

#: {(device, stream): (workspace, flags)}, each grown to the largest launch seen.
_BUFFERS: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def buffers(device: torch.device, programs: int, tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 workspace (``programs`` slots of ``tile`` elements) and the zeroed int32 flags
    of ``device``'s current stream; fresh ones, not kept, under graph capture."""
    if _capturing(device):
        return (
            torch.empty(programs * tile, dtype=torch.float32, device=device),
            torch.zeros(programs, dtype=torch.int32, device=device),
        )
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream)
    ws, flags = _BUFFERS.get(key, (None, None))
    if ws is None or ws.numel() < programs * tile or flags.numel() < programs:
        ws = torch.empty(programs * tile, dtype=torch.float32, device=device)
        flags = torch.zeros(programs, dtype=torch.int32, device=device)
        _BUFFERS[key] = (ws, flags)
    return ws, flags


def _capturing(device: torch.device) -> bool:
    """Whether ``device``'s current stream is capturing a CUDA graph."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def run(kwargs: dict[str, Any], grid: tuple[int], args: tuple, runners: dict, interp: bool):
    """Launch on ``grid`` with a plan's ``kwargs``; ``args``: A, B, the output C and the sizes
    (M, N, K and the (m, k), (n, k) strides of A and B)."""
    a, b, c, sizes = args
    ws, flags = buffers(a.device, grid[0], kwargs["BLOCK_M"] * kwargs["BLOCK_N"])
    call = (a, b, c, ws, flags, *sizes, sizes[1], 1)  # C: a new row-major [M, N]
    if interp:
        _gemm_streamk_kernel[grid](*call, **kwargs)
    else:
        fast_launch.launch(_gemm_streamk_kernel, runners, grid, call, kwargs, 5)
