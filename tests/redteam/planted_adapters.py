"""Adapters that run a planted kernel file of :mod:`tests.redteam.sources` in a worker.

The planted source is written to ``<tmp>/redteam-planted/`` (one file per source text, shared
by every process, replaced atomically) and imported as the module ``redteam_planted_<name>``
(Triton reads a kernel's source from its file, so ``exec`` would not do); the adapter's
forward is that module's ``matmul_nt``. The static audit reads the same text, so the static
and the dynamic check judge one and the same candidate.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import torch

from tests.redteam import sources
from tests.redteam.candidates import Case, TinyGemm

_DIR = Path(tempfile.gettempdir()) / "redteam-planted"


def module_name(source: str) -> str:
    """Name under which the planted source ``source`` (a constant of ``sources``) is imported."""
    return f"redteam_planted_{source.lower()}"


def load(source: str) -> ModuleType:
    """Import the planted kernel file ``sources.<source>`` (once per process)."""
    name = module_name(source)
    if name in sys.modules:
        return sys.modules[name]
    text = getattr(sources, source)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = _DIR / digest / f"{name}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class PlantedKernel(TinyGemm):
    """The tiny GEMM adapter with ``matmul_nt`` taken from the planted file ``SOURCE``."""

    SOURCE: ClassVar[str] = "INCUMBENT"

    def __init__(self) -> None:
        self.kernel = load(self.SOURCE)

    def forward(self, case: Case) -> torch.Tensor:
        return self.kernel.matmul_nt(case.a, case.b)


class Incumbent(PlantedKernel):
    SOURCE = "INCUMBENT"


class ContentClassAttr(PlantedKernel):
    SOURCE = "CONTENT_CLASS_ATTR"


class ContentClosure(PlantedKernel):
    SOURCE = "CONTENT_CLOSURE"


class ContentModuleList(PlantedKernel):
    SOURCE = "CONTENT_MODULE_LIST"


class ContentLru(PlantedKernel):
    SOURCE = "CONTENT_LRU"


class ContentSampled(PlantedKernel):
    SOURCE = "CONTENT_SAMPLED"


class VendorLinear(PlantedKernel):
    SOURCE = "VENDOR_LINEAR"
