"""An honest op whose epilogue runs through torch.compile's default (inductor) backend, which
keeps a thread pool for its compiles, for ``test_redteam.py``; holds no tests itself."""

from __future__ import annotations

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


def _epilogue(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0 - x


class Inductor(TinyGemm):
    def __init__(self) -> None:
        self.epilogue = torch.compile(_epilogue)

    def forward(self, case: Case) -> torch.Tensor:
        return self.epilogue(matmul_nt(case.a, case.b))
