"""What a timed call may return: plain tensors, alone or in tuples, lists and mappings (nested,
named tuples included); anything else is refused before it is timed."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch

from kernel_ratchet.harness import anticheat as ac


def test_nested_outputs_are_named_by_their_path() -> None:
    """A kernel that returns its results grouped (tuples of named tuples, a dict of tuples) is
    read whole: every tensor checked and poisoned, named where it sits."""

    class Pair(NamedTuple):
        data: torch.Tensor
        scale: torch.Tensor
        extra: torch.Tensor | None = None

    t = [torch.zeros(2) + i for i in range(5)]
    out = (Pair(t[0], t[1]), {"b": [t[2], (t[3], None)]}, t[4])
    named = ac.output_tensors(out, "forward()")
    assert [n for n, _ in named] == ["0.data", "0.scale", "1.b.0", "1.b.1.0", "2"]
    assert all(v.data_ptr() == w.data_ptr() for (_, v), w in zip(named, t, strict=True))


@pytest.mark.parametrize(
    "bad,where",
    [
        ((torch.zeros(2), [torch.zeros(1), 3.0]), "'1.1'"),
        ({"a": (torch.zeros(1), torch.nn.Parameter(torch.zeros(1)))}, "'a.1'"),
        ((None, (None,)), "no tensor"),
    ],
)
def test_a_nested_non_tensor_is_refused_by_its_path(bad, where) -> None:
    with pytest.raises(ac.CheatDetected, match=where):
        ac.output_tensors(bad, "forward()")


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_outputs_are_poisoned_and_read_back(dtype) -> None:
    """An FP8 output (a quantization kernel's) is poisoned before a timed call and, unless the
    call rewrites it, read back as not finite."""
    out = (torch.randn(4, 8).to(dtype), torch.ones(4))
    named = ac.output_tensors(out, "forward()")
    assert ac.nonfinite(named) == []
    ac.poison(named)
    assert ac.nonfinite(named) == ["0", "1"]
    out[0].copy_(torch.randn(4, 8).to(dtype))  # the kernel rewrote its fp8 output
    assert ac.nonfinite(named) == ["1"]


def test_fp8_outputs_are_read_in_chunks_to_their_last_element(monkeypatch) -> None:
    """A large fp8 output is read through fp16 a chunk at a time; a NaN in the last chunk of a
    strided (transposed) output is still found."""
    from kernel_ratchet.harness import returned

    monkeypatch.setattr(returned, "_FP8_CHUNK", 7)
    q = torch.randn(6, 5).to(torch.float8_e4m3fn).t()  # 30 elements: 5 chunks, not contiguous
    assert ac.nonfinite([("q", q)]) == []
    q[-1, -1] = math.nan
    assert ac.nonfinite([("q", q)]) == ["q"]
