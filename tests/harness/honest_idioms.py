"""Honest candidates written with common library idioms, for the false-positive test of the
worker's checks (``test_redteam.py``); holds no tests itself."""

from __future__ import annotations

import functools
import logging
import warnings

import torch

from tests.harness.redteam_base import TinyGemm, matmul_nt

_log = logging.getLogger("my_kernels")


@functools.cache
def _plan(m: int, n: int) -> tuple[int, int]:
    return (m, n)  # a launch plan cached on geometry


def _same(x: torch.Tensor) -> torch.Tensor:
    return x * 1.0


class Idioms(TinyGemm):
    """Logging, warnings filters, a geometry cache, torch.compile (eager backend),
    ``torch.jit.script`` and ``torch.vmap`` around the honest kernel."""

    def __init__(self) -> None:
        logging.basicConfig(level=logging.WARNING)
        warnings.filterwarnings("ignore", category=UserWarning)
        self.compiled = torch.compile(_same, backend="eager", dynamic=False)
        self.scripted = torch.jit.script(_same)

    def forward(self, case):  # type: ignore[no-untyped-def]
        _plan(case.a.shape[0], case.b.shape[0])
        _log.debug("launch %s", case.a.shape)
        warnings.warn("a warning the filter drops", UserWarning, stacklevel=1)
        out = self.compiled(matmul_nt(case.a, case.b))
        rows = torch.vmap(lambda r: r * 1.0)(out)
        return self.scripted(rows)


class ForwardState(TinyGemm):
    """A forward that leaves what a backward would need in the case, new tensors every call
    (a quantized copy of the weight, say): the case's inputs stay the ones make_case built."""

    def forward(self, case):  # type: ignore[no-untyped-def]
        case.saved = {"bt": case.b.t().contiguous()}
        return matmul_nt(case.a, case.saved["bt"].t())
