"""The stream-order check compares outputs bit for bit, so NaN-holding outputs (partial writes,
poisoned caches) are reported by the check that catches them, not as side-stream work."""

from __future__ import annotations

import math

import torch

from kernel_ratchet.harness.anticheat import _same_bits


def test_nan_payloads_compare_equal_and_changed_values_do_not():
    a = torch.tensor([1.0, math.nan, 3.0])
    assert _same_bits(a, a.clone())
    assert not torch.equal(a, a.clone())  # why the bitwise comparison is needed
    assert not _same_bits(a, torch.tensor([1.0, math.nan, 3.5]))


def test_layouts_dtypes_and_shapes():
    t = torch.randn(4, 6).t()  # non-contiguous
    assert _same_bits(t, t.clone())
    f8 = torch.randn(3, 4).to(torch.float8_e4m3fn)
    assert _same_bits(f8, f8.clone())
    assert not _same_bits(torch.zeros(2, 3), torch.zeros(3, 2))
    assert not _same_bits(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
