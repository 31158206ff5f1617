"""Adapters around the tiny example GEMM whose output lives in a kept buffer or in an input.

Imported inside worker processes as ``tests.harness.kept_buffer_adapters:<Class>``; holds no
tests.
"""

from __future__ import annotations

import torch

from tests.redteam.candidates import Case, TinyGemm, matmul_nt


class KeptBuffer(TinyGemm):
    """Honest: one preallocated output buffer per shape, fully rewritten by every call."""

    def __init__(self) -> None:
        self.buf: torch.Tensor | None = None

    def _buffer(self, case: Case) -> torch.Tensor:
        shape = (case.a.shape[0], case.b.shape[0])
        if self.buf is None or tuple(self.buf.shape) != shape:
            self.buf = torch.empty(shape, dtype=torch.float32, device=case.a.device)
        return self.buf

    def forward(self, case: Case) -> torch.Tensor:
        return self._buffer(case).copy_(matmul_nt(case.a, case.b))


class StaleKeptBuffer(KeptBuffer):
    """The kept buffer written once, then returned as it is: stale for new inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.written = False

    def forward(self, case: Case) -> torch.Tensor:
        buf = self._buffer(case)
        if not self.written:
            buf.copy_(matmul_nt(case.a, case.b))
            self.written = True
        return buf


class IntoInput(TinyGemm):
    """Writes the right result into its first input and returns it (square shapes only)."""

    def forward(self, case: Case) -> torch.Tensor:
        return case.a.copy_(matmul_nt(case.a, case.b))


class ViewOut(torch.autograd.Function):
    """A custom autograd Function that returns a view of its result (as fla's norms do)."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = a.detach() @ b.t()
        return out.view(out.shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[None, None]:
        return None, None
