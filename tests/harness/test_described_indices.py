"""Index outputs of a described op (top-k, argmax) marked ``gathers=<input>``: compared by
the values they select, wrong before any value when they cannot be right, and the mark
refused where it cannot apply."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import load_shapes
from kernel_ratchet.harness.described_spec import inline_spec
from kernel_ratchet.harness.description import Description
from tests.harness.described_helpers import OPS, _adapter, _check

TOPK = {
    "function": f"{OPS}:topk_last_tie",
    "reference": f"{OPS}:topk_ref",
    "inputs": {"x": "[M, N] dtype | rows=0"},  # a row in eight all zero: N-way ties
    "outputs": {"v": "[M, 4] dtype", "i": "[M, 4] int64 | gathers=x"},
}
TIED = {"label": "ties", "M": 64, "N": 40, "dtype": "bfloat16"}


def _topk(**changes):
    return _adapter(**{"gradients": [], "bytes": None, "flops": None, **TOPK, **changes})


def test_indices_that_gather_an_input_compare_by_the_values_they_select():
    shape = load_shapes(inline_spec([TIED]))[0]
    got, res = _check(_topk(), shape)
    assert res.passed and got["i"].dtype == torch.bfloat16, res.reason  # values of x
    plain = _topk(outputs={"v": "[M, 4] dtype", "i": "[M, 4] int64"})
    _, tied = _check(plain, shape)  # as indices, the other tie-break differs on the zero rows
    assert not tied.passed and "gathers=<input>" in tied.reason
    _, wrong = _check(_topk(function=f"{OPS}:topk_second_best"), shape)
    assert not wrong.passed and "output's indices select" in wrong.reason


@pytest.mark.parametrize(
    ("function", "says"),
    [("topk_repeats_first", "repeats index"), ("argmax_past_the_end", "outside \\[0, 40\\)")],
)
def test_indices_that_cannot_be_right_are_wrong_before_any_value(function, says):
    from kernel_ratchet.harness.index_outputs import WrongOutput
    from kernel_ratchet.harness.outcome import classify_exception

    outputs = {"i": "[M] int64 | gathers=x"} if function.startswith("argmax") else None
    ref = f"{OPS}:argmax_ref" if outputs else TOPK["reference"]
    adapter = _topk(function=f"{OPS}:{function}", reference=ref, outputs=outputs or TOPK["outputs"])
    case = adapter.make_case(load_shapes(inline_spec([TIED]))[0], 7, "cpu")
    with pytest.raises(WrongOutput, match=says) as info:
        adapter.outputs(case)
    assert classify_exception(info.value)[0] == "wrong"


def test_an_argmax_gathers_with_one_dimension_fewer_and_a_bad_reference_is_the_users():
    argmax = {"function": f"{OPS}:argmax_last_tie", "reference": f"{OPS}:argmax_ref"}
    adapter = _topk(**argmax, outputs={"i": "[M] int64 | gathers=x"})
    assert _check(adapter, load_shapes(inline_spec([TIED]))[0])[1].passed
    broken = _topk(
        function=argmax["function"],
        reference=f"{OPS}:argmax_past_the_end",
        outputs={"i": "[M] int64 | gathers=x"},
    )
    case = broken.make_case(load_shapes(inline_spec([TIED]))[0], 7, "cpu")
    with pytest.raises(ProfileError, match="the reference's i .*fix the reference"):
        broken.reference(case)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"inputs": {"x": "[M, N] int64 | gathers=x"}}, "is for an integer output, not an input"),
        ({"outputs": {"i": "[M, 4] int64 | gathers=y"}}, "gathers=y names no input"),
        (
            {"outputs": {"i": "[M, N, 4] int64 | gathers=x"}},
            "rank \\(top-k, argsort\\) or one less",
        ),
        ({"outputs": {"i": "[M, 4] float32 | gathers=x"}}, "marks an integer output"),
    ],
)
def test_a_gathers_mark_that_cannot_apply_is_refused_at_load(change, says):
    with pytest.raises(ValueError, match=says):
        Description.from_dict({**TOPK, **change})
