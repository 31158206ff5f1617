"""The tool-reach audit: what a kernel change adds that reaches for the checker."""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.tool_reach import tool_reach

KERNEL = """
import torch
import triton
from kernel_ratchet.kernels.gemm import configs


def matmul(a, b):
    return torch.empty(a.shape[0], b.shape[0])
"""


@pytest.mark.parametrize(
    ("added", "named"),
    [
        ("from kernel_ratchet.harness import correctness\n", "kernel_ratchet.harness"),
        (
            "import importlib\nm = importlib.import_module('kernel_ratchet.harness.timing')\n",
            "importlib.import_module('kernel_ratchet.harness.timing')",
        ),
        ("import sys\nm = sys.modules['kernel_ratchet.harness.anticheat']\n", "sys.modules"),
        ("setattr(matmul, '__code__', None)\n", "a write to a function's __code__"),
        ("from kernel_ratchet import harness\n", "from kernel_ratchet import harness"),
        ("matmul.__code__ = (lambda a, b: a).__code__\n", "__code__"),
        ("import sys\nf = sys._getframe(2)\n", "sys._getframe"),
        ("import gc\nobjs = gc.get_objects()\n", "gc.get_objects"),
    ],
)
def test_an_added_reach_for_the_tool_is_named(added, named):
    why = tool_reach({"k.py": KERNEL}, {"k.py": KERNEL + added})
    assert why is not None and why.startswith("k.py adds") and named in why


@pytest.mark.parametrize(
    "honest",
    [
        "from kernel_ratchet.harness.adapter import SNR_FP32\n",  # the public adapter API
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kernel_ratchet.guard\n",
        "names = matmul.__code__.co_varnames\ng = matmul.__globals__['torch']\n",  # reads
        "import logging\nlog = logging.getLogger('kernel_ratchet.harness')\n",
        "import ctypes\n",  # a driver call; native patching is a documented residual
    ],
)
def test_honest_kernel_code_is_not_counted(honest):
    assert tool_reach({"k.py": KERNEL}, {"k.py": KERNEL + honest}) is None


def test_code_moved_between_kernel_files_is_no_addition():
    had = KERNEL + "import gc\nx = gc.get_objects()\n"
    assert tool_reach({"a.py": had, "b.py": KERNEL}, {"a.py": KERNEL, "b.py": had}) is None


def test_the_ops_own_package_and_what_the_incumbent_had_are_not_counted():
    assert tool_reach({"k.py": KERNEL}, {"k.py": KERNEL.replace("empty", "zeros")}) is None
    had = KERNEL + "import gc\n"
    assert tool_reach({"k.py": had}, {"k.py": had + "x = gc.get_objects()\n"}) is not None
    assert tool_reach({"k.py": had + "gc.collect()\n"}, {"k.py": had}) is None
