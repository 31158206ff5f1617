"""Repeated 16-bit GEMMs of one geometry, launched from what their first call decided.

A small GEMM's eager time is its host's: :func:`.launch.matmul` checks the operands, reads the
launch plan of their geometry, lays out the kernel's arguments and finds the compiled kernel's
runner, several microseconds of Python per call before the launch. Once a call of plain
operands (16-bit, row-major, both already laid out as the kernel reads them, no copies) has
run, its key here (shapes, strides, dtypes, 16-byte alignment and device of both operands,
their majorness, output dtype, kind) maps to a :class:`Quick` entry: the output's allocation
and the runner's launch, nothing else (for a split-K plan: also the kept slots and counts its
tiles finish through, :func:`.launch_scratch.split_slots`). Everything the plan and the
runner depend on is in the key, so a call with any of it changed takes the full path. A call
that the plan routes to the warp-specialized 16-bit kernel (:mod:`.bf16_ws_launch`) gets an
entry too: its runner takes the two operands and the output, and encodes their descriptors.
"""

from __future__ import annotations

from typing import Any

import torch

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm import launch_scratch

#: Entries kept; at the limit the table starts over (a run of ever-new geometries, such as
#: variable sequence lengths, must not grow it without bound).
LIMIT = 1024

_QUICK: dict[tuple, Quick] = {}


def key(
    a: torch.Tensor, b: torch.Tensor, a_kmajor: bool, b_kmajor: bool, out: Any, kind: str
) -> tuple:
    """What a call's plan and runner depend on, beside the caller's fixed arguments."""
    return (
        a.shape, a.stride(), a.dtype, a.data_ptr() % 16,
        b.shape, b.stride(), b.dtype, b.data_ptr() % 16,
        a.device, a_kmajor, b_kmajor, out, kind,
    )  # fmt: skip


class Quick:
    """The output's shape and dtype, the grid and the runner of one key; ``descriptors``: the
    runner is the warp-specialized kernel's, which takes ``(a, b, c)`` and encodes TMA
    descriptors in the device's context; else the Triton kernel's ``(a, b, c, scales...)``;
    ``slots``: the Triton kernel's plan splits K, (output tiles, elements per tile) of the
    slots its tiles finish through."""

    __slots__ = ("M", "N", "dtype", "grid", "runner", "descriptors", "slots")

    def __init__(
        self,
        M: int,
        N: int,
        dtype: torch.dtype,
        grid: int,
        runner: Any,
        descriptors: bool,
        slots: tuple[int, int] | None = None,
    ) -> None:
        self.M, self.N, self.dtype, self.grid, self.runner = M, N, dtype, grid, runner
        self.descriptors, self.slots = descriptors, slots

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty((self.M, self.N), dtype=self.dtype, device=a.device)
        if self.slots:
            self.runner(self.grid, (a, b, c, *launch_scratch.split_slots(a.device, *self.slots)))
        elif self.descriptors:
            cuda_context.make_current(a.device)
            self.runner(self.grid, (a, b, c))
        else:
            self.runner(self.grid, (a, b, c, c, c))
        return c


def get(k: tuple) -> Quick | None:
    return _QUICK.get(k)


def remember(
    k: tuple,
    M: int,
    N: int,
    dtype: torch.dtype,
    grid: int,
    runner: Any,
    *,
    descriptors: bool = False,
    slots: tuple[int, int] | None = None,
) -> None:
    """Keep the entry of key ``k`` (``runner``: the plan's bound runner; False or None: the
    call's Triton has none, and the full path stays; ``descriptors``, ``slots``: see
    :class:`Quick`)."""
    if not runner:
        return
    if len(_QUICK) >= LIMIT:
        _QUICK.clear()
    _QUICK[k] = Quick(M, N, dtype, grid, runner, descriptors, slots)


def forget() -> None:
    """Drop every entry (tests; a process that changes the bundled configs at run time)."""
    _QUICK.clear()
