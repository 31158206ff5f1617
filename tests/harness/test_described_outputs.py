"""What a described op's function returns, taken as its outputs: a tuple with None entries,
a dict, an integer output, a non-tensor, inputs written in place, and outputs in a lower
precision than the op."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import load_adapter, load_shapes
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.described_spec import described_spec, inline_spec
from tests.harness.described_helpers import OPS, SHAPES, _adapter, _check


def test_none_entries_of_a_returned_tuple_are_not_outputs():
    adapter = _adapter(function=f"{OPS}:rms_norm_with_extras")
    got, res = _check(adapter, load_shapes(inline_spec(SHAPES))[0])
    assert res.passed and set(got) == {"y", "dx", "dweight"}, res.reason
    two = _adapter(function=f"{OPS}:rms_norm_with_extras", outputs=["y", "z"])
    with pytest.raises(TypeError, match="returned 1 tensor.*None entries"):
        _check(two, load_shapes(inline_spec(SHAPES))[0])


def test_an_integer_output_is_checked_and_has_no_incoming_gradient():
    adapter = _adapter(
        function=f"{OPS}:rms_norm_and_argmax",
        reference=f"{OPS}:rms_norm_and_argmax_ref",
        outputs=["y", "top"],
    )
    shape = load_shapes(inline_spec(SHAPES))[1]
    case = adapter.make_case(shape, 7, "cpu")
    got, ref = adapter.outputs(case), adapter.reference(case)
    res = check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})
    assert res.passed and set(got) == {"y", "top", "dx", "dweight"}, res.reason
    assert got["top"].dtype == torch.int64 and case.dtop is None and case.dy is not None


def test_an_output_in_a_lower_precision_than_the_op_is_held_to_the_ops_bar():
    """An fp32 op whose kernel hands back bf16 (55 dB) is judged at fp32's 80 dB, not at the
    40 dB of the dtype it chose; on bf16 shapes the same function passes."""
    adapter = _adapter(function=f"{OPS}:rms_norm_bf16_out")
    bf, f32 = load_shapes(inline_spec(SHAPES))
    got, res = _check(adapter, f32)
    assert got["y"].dtype == torch.bfloat16 and not res.passed, res.reason
    assert adapter.threshold("y") == 80.0
    assert _check(adapter, bf)[1].passed


def test_an_output_in_an_undeclared_lower_dtype_gets_a_note_saying_how_to_declare_it():
    """An fp8 quantization on bf16 shapes is held to bf16's 40 dB unless its output is
    declared fp8; the adapter says so, and declaring it removes the note and the stricter bar."""
    desc = {
        "function": f"{OPS}:quantize_rows",
        "reference": f"{OPS}:quantize_rows_ref",
        "inputs": {"x": "[M, N] dtype"},
        "outputs": ["q"],
    }
    shape = load_shapes(inline_spec([{"label": "s", "M": 64, "N": 256, "dtype": "bfloat16"}]))[0]
    plain = load_adapter(described_spec(desc, "memory"))
    _check(plain, shape)
    assert plain.threshold("q") == 40.0
    (note,) = plain.dtype_notes()
    assert "q comes back float8_e4m3fn and is held to bfloat16's 40 dB" in note
    declared = load_adapter(
        described_spec({**desc, "outputs": {"q": "[M, N] float8_e4m3fn"}}, "memory")
    )
    assert _check(declared, shape)[1].passed
    assert declared.threshold("q") == 25.0 and declared.dtype_notes() == []


def test_an_fp8_output_against_an_fp8_reference_is_held_to_the_same_recipes_bar():
    """25 dB is fp8's bar against a full-precision result; against a reference that quantizes
    the same way, a scale off by 3% (about 26 dB) is wrong, and the bar is 40 dB."""
    desc = {
        "function": f"{OPS}:quantize_rows",
        "reference": f"{OPS}:quantize_rows_fp8_ref",
        "inputs": {"x": "[M, N] dtype"},
        "outputs": {"q": "[M, N] float8_e4m3fn"},
    }
    shape = load_shapes(inline_spec([{"label": "s", "M": 64, "N": 256, "dtype": "float32"}]))[0]
    same = load_adapter(described_spec(desc, "memory"))
    assert _check(same, shape)[1].passed and same.threshold("q") == 40.0
    off = load_adapter(
        described_spec({**desc, "function": f"{OPS}:quantize_rows_headroom"}, "memory")
    )
    got, res = _check(off, shape)
    assert not res.passed and 24 < res.snr["q"] < 30, res.reason
    # a tolerance the user declares stands
    loose = {**desc, "function": f"{OPS}:quantize_rows_headroom", "tolerance": {"q": 25}}
    assert _check(load_adapter(described_spec(loose, "memory")), shape)[1].passed


def test_a_function_returning_a_dict_gives_its_outputs_by_name():
    adapter = _adapter(
        function=f"{OPS}:rms_norm_dict",
        reference=f"{OPS}:rms_norm_dict_ref",
        outputs=["y", "rstd"],
        gradients=[],
    )
    got, res = _check(adapter, load_shapes(inline_spec(SHAPES))[1])
    assert res.passed and set(got) == {"y", "rstd"}, res.reason
    missing = _adapter(function=f"{OPS}:rms_norm_dict", outputs=["y", "var"], gradients=[])
    with pytest.raises(TypeError, match=r"keys \['rstd', 'y'\], without .*\['var'\]"):
        _check(missing, load_shapes(inline_spec(SHAPES))[1])


def test_a_non_tensor_among_the_returned_values_is_named():
    adapter = _adapter(function=f"{OPS}:rms_norm_and_count", outputs=["y", "n"], gradients=[])
    with pytest.raises(TypeError, match="returned int at position 1 where .* are tensors"):
        _check(adapter, load_shapes(inline_spec(SHAPES))[1])


def test_an_in_place_op_returning_none_gives_the_inputs_it_wrote():
    axpy = {
        "function": f"{OPS}:axpy_",
        "reference": f"{OPS}:axpy_ref",
        "inputs": {"y": "[M, N] float32", "x": "[M, N] float32"},
        "gradients": [],
    }
    adapter = _adapter(**axpy, outputs=["y"], inplace_outputs=["y"])
    from kernel_ratchet.harness import inplace

    shape = load_shapes(inline_spec(SHAPES))[1]
    case = adapter.make_case(shape, 7, "cpu")
    kept = inplace.prepared(adapter, case)
    got = adapter.outputs(case)
    ref = inplace.reference(adapter, case, kept)
    assert check_outputs(got, ref, {"y": 80.0}).passed and got["y"] is case.y
    undeclared = _adapter(**axpy, outputs=["y"])
    with pytest.raises(TypeError, match="returned None.*both outputs and inplace_outputs"):
        undeclared.outputs(undeclared.make_case(shape, 7, "cpu"))
