"""Test set-up shared by the whole suite.

Without a CUDA GPU, Triton kernels run through the interpreter (TRITON_INTERPRET=1, set before
any kernel module is imported) on CPU tensors, and tests marked ``gpu`` are skipped. On the H200
the same suite runs the real kernels; run ``pytest -m gpu`` there before resolving kernel work.
"""

from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200 with `pytest -m gpu`)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    """'cuda' on a GPU machine, else 'cpu' (kernels then run in the Triton interpreter)."""
    return "cuda" if HAS_CUDA else "cpu"
