"""The inputs a described op's adapter draws: integers over their declared range and
sentinels, and the marks on an input (or an output's incoming gradient) that draw the
values and layouts real inputs hold."""

from __future__ import annotations

import re

import pytest
import torch

from kernel_ratchet.harness.adapter import load_adapter, load_shapes
from kernel_ratchet.harness.described_spec import described_spec, inline_spec
from kernel_ratchet.harness.symbolic import TensorSpec
from tests.harness.described_helpers import DESC, OPS, SHAPES, _adapter, _check

XENT = {
    "function": f"{OPS}:cross_entropy_first_128",
    "reference": f"{OPS}:cross_entropy",
    "inputs": {"logits": "[N, V] float32", "targets": "[N] int64 < V"},
    "outputs": ["loss"],
    "gradients": ["logits"],
}


def test_an_integer_input_is_drawn_over_its_declared_range():
    """Class ids drawn in [0, V): a kernel wrong past id 127 fails; drawn in [0, 128) (no bound
    declared) it passed, and ratchet check says so."""
    from types import SimpleNamespace

    from kernel_ratchet.profile.described_check import integer_bounds

    shape = load_shapes(inline_spec([{"label": "v1000", "N": 512, "V": 1000}]))[0]
    bounded = load_adapter(described_spec(XENT, "memory"))
    case = bounded.make_case(shape, 3, "cpu")
    assert 128 <= int(case.targets.max()) < 1000 and int(case.targets.min()) >= 0
    assert not _check(bounded, shape)[1].passed
    op = SimpleNamespace(name="xent", adapter=described_spec(XENT, "memory"))
    assert integer_bounds(op) is None

    loose = {**XENT, "inputs": {"logits": "[N, V] float32", "targets": "[N] int64"}}
    assert _check(load_adapter(described_spec(loose, "memory")), shape)[1].passed  # unseen
    warned = integer_bounds(SimpleNamespace(name="xent", adapter=described_spec(loose, "memory")))
    assert warned.warning and "targets: '[N] int64 < V'" in warned.detail


def test_every_declared_sentinel_is_drawn_even_in_a_few_rows():
    """About one entry in eight is a sentinel, so four labels often held no ignore_index and
    the path that handles it went unchecked: each declared value is drawn at least once, and
    one entry stays as drawn."""
    from kernel_ratchet.harness.input_values import draw, parse_marks

    marks = parse_marks(["-100", "-1"], "[M] int64 < V | -100 | -1", True, False)
    for n in (3, 4, 8):
        for seed in range(40):
            g = torch.Generator().manual_seed(seed)
            t = draw((n,), torch.int64, marks, g, "cpu", high=50)
            assert {-100, -1} <= set(t.tolist()) and bool((t >= 0).any()), (n, seed, t)


@pytest.mark.parametrize(
    "text,why",
    [("[N] float32 < V", "integer inputs only"), ("[N] int64 < V +", "neither an int")],
)
def test_a_bound_on_values_is_for_integers_and_arithmetic(text, why):
    with pytest.raises(ValueError, match=why):
        TensorSpec.parse(text)


def test_an_integer_input_also_draws_its_declared_sentinels():
    """'| -100' draws about one target in eight as the ignore_index: a kernel that counts
    them as class 0 fails; without the sentinel declared it was never drawn."""
    ignoring = {**XENT, "function": f"{OPS}:cross_entropy_clamped"}
    ignoring["inputs"] = {"logits": "[N, V] float32", "targets": "[N] int64 < V | -100"}
    shape = load_shapes(inline_spec([{"label": "v300", "N": 512, "V": 300}]))[0]
    adapter = load_adapter(described_spec(ignoring, "memory"))
    targets = adapter.make_case(shape, 3, "cpu").targets
    share = float((targets == -100).float().mean())
    assert 0.05 < share < 0.25 and int(targets.max()) < 300
    assert not _check(adapter, shape)[1].passed
    plain = {**ignoring, "inputs": XENT["inputs"]}
    assert _check(load_adapter(described_spec(plain, "memory")), shape)[1].passed  # unseen


MARKED = [
    # (function, reference, inputs, the marks its real inputs need)
    ("gelu_tanh_by_exp", "gelu_tanh", {"x": "[M, N] float32"}, {"x": "scale=100"}),
    (
        "masked_softmax_unguarded",
        "masked_softmax",
        {"x": "[M, N] float32", "mask": "[M, N] bool"},
        {"mask": "rows=1"},
    ),
    ("rms_norm_eps_outside", "rms_norm_ref", DESC["inputs"], {"x": "rows=0"}),
    ("rms_norm_dense_rows", "rms_norm_ref", DESC["inputs"], {"x": "layout=padded"}),
]


@pytest.mark.parametrize(("fn", "ref", "inputs", "marks"), MARKED, ids=[m[0] for m in MARKED])
def test_a_kernel_wrong_on_marked_inputs_fails_only_when_they_are_declared(fn, ref, inputs, marks):
    """Each kernel is right on plain randn, contiguous inputs and wrong on what real inputs
    hold: large magnitudes, fully masked rows, zero rows, a slice of a wider buffer."""
    desc = {"function": f"{OPS}:{fn}", "reference": f"{OPS}:{ref}", "outputs": ["y"]}
    shape = load_shapes(inline_spec([{"label": "s", "M": 64, "N": 96, "dtype": "float32"}]))[0]
    plain = load_adapter(described_spec({**desc, "inputs": inputs}, "memory"))
    assert _check(plain, shape)[1].passed
    marked = {n: f"{t} | {marks[n]}" if n in marks else t for n, t in inputs.items()}
    got, res = _check(load_adapter(described_spec({**desc, "inputs": marked}, "memory")), shape)
    assert not res.passed, res.reason


def test_marks_draw_the_values_and_layouts_they_name():
    from kernel_ratchet.harness.input_values import PAD

    shape = load_shapes(inline_spec([{"label": "s", "M": 64, "N": 96, "dtype": "float32"}]))[0]
    inputs = {
        "big": "[M, N] float32 | scale=300",
        "pad": "[M, N] dtype | rows=0 | rows=-inf | layout=padded",
        "tr": "[M, N] bf16 | layout=transposed",
        "one": "[M, N] float32 | layout=broadcast",
        "mask": "[M, N] bool | rows=true",
    }
    adapter = load_adapter(described_spec({**DESC, "inputs": inputs, "gradients": []}, "memory"))
    case = adapter.make_case(shape, 5, "cpu")
    assert 200 < float(case.big.std()) < 400
    assert case.pad.stride() == (96 + PAD, 1)
    filled = case.pad.isinf().all(-1) | (case.pad == 0).all(-1)
    assert 0 < int(filled.sum()) < 24 and int(case.pad.isinf().all(-1).sum()) > 0
    assert case.tr.stride() == (1, 64) and case.tr.dtype == torch.bfloat16
    assert case.one.stride() == (0, 1) and case.one.std() > 0.5
    assert 0 < int(case.mask.all(-1).sum()) < 24
    again = adapter.make_case(shape, 5, "cpu")
    assert all(torch.equal(getattr(case, n), getattr(again, n)) for n in ("big", "tr", "one"))


def test_marks_on_an_output_draw_its_incoming_gradient():
    desc = {**DESC, "outputs": {"y": "[M, N] dtype | layout=broadcast"}}
    adapter = load_adapter(described_spec(desc, "memory"))
    shape = load_shapes(inline_spec(SHAPES))[1]
    case = adapter.make_case(shape, 5, "cpu")
    adapter.forward(case)
    assert case.dy.stride() == (0, 1)
    assert _check(adapter, shape)[1].passed


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[M] float32 | -100", "an integer value of an integer input"),
        ("[M] int64 | scale=3", "a positive number and a floating tensor"),
        ("[M] float32 | scale=-1", "a positive number"),
        ("[M] float32 | rows=nan", "rows=nan is not a number"),
        ("[M] int32 | rows=0.5", "rows=0.5 is not an integer"),
        ("[M] bool | rows=2", "rows=2 is not 0, 1, true, false"),
        ("[M, N] bf16 | layout=strided", "layout=strided is not one of padded"),
        ("[M] float32 | scale=2 | scale=3", "once each"),
    ],
)
def test_a_wrong_mark_says_what_to_write(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        TensorSpec.parse(text)


@pytest.mark.parametrize(
    ("text", "dtype", "says"),
    [
        ("[M, N] float16 | scale=1e5", "float16", "scale=100000 does not fit float16"),
        ("[M, N] float8_e4m3fn | rows=-inf", "float8_e4m3fn", "-inf does not fit float8_e4m3fn"),
        ("[M] int8 < 100 | 1000", "int8", "1000 does not fit int8"),
        ("[M, N] dtype | scale=3", "int64", "scale= is for floating tensors; this one is int64"),
    ],
)
def test_a_mark_the_dtype_cannot_hold_is_refused_when_drawn(text, dtype, says):
    """Inf from an overflowing scale, a saturated -inf, a wrapped sentinel: not what the
    description says, so not drawn."""
    adapter = _adapter(inputs={"x": text}, gradients=[])
    shape = load_shapes(inline_spec([{"label": "s", "M": 8, "N": 16, "dtype": dtype}]))[0]
    with pytest.raises(ValueError, match=re.escape(says)):
        adapter.make_case(shape, 0, "cpu")


def test_a_1d_broadcast_is_one_value_and_an_empty_tensor_takes_any_mark():
    inputs = {"dy": "[M] float32 | layout=broadcast", "e": "[M, N] float32 | rows=0"}
    adapter = _adapter(inputs=inputs, gradients=[])
    shape = load_shapes(inline_spec([{"label": "s", "M": 8, "N": 0}]))[0]
    case = adapter.make_case(shape, 0, "cpu")
    assert case.dy.stride() == (0,) and int(case.dy.unique().numel()) == 1
    assert case.e.shape == (8, 0)
