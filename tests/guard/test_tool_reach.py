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
            "the name",
        ),
        ("from kernel_ratchet import harness\n", "from kernel_ratchet import harness"),
        ("matmul.__code__ = (lambda a, b: a).__code__\n", "__code__"),
        ("import sys\nf = sys._getframe(2)\n", "sys._getframe"),
        ("import gc\nobjs = gc.get_objects()\n", "gc.get_objects"),
        ("import ctypes\n", "ctypes"),
    ],
)
def test_an_added_reach_for_the_tool_is_named(added, named):
    why = tool_reach({"k.py": KERNEL}, {"k.py": KERNEL + added})
    assert why is not None and why.startswith("k.py adds") and named in why


def test_the_ops_own_package_and_what_the_incumbent_had_are_not_counted():
    assert tool_reach({"k.py": KERNEL}, {"k.py": KERNEL.replace("empty", "zeros")}) is None
    had = KERNEL + "import gc\n"
    assert tool_reach({"k.py": had}, {"k.py": had + "x = gc.get_objects()\n"}) is not None
    assert tool_reach({"k.py": had + "gc.collect()\n"}, {"k.py": had}) is None
