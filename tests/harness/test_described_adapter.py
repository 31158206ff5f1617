"""The adapter generated from an op described in ratchet.yaml: outputs and gradients against
the reference, thresholds per dtype, work formulas, symbolic shapes and constants, and a
description's errors named by key."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import Shape, load_shapes
from kernel_ratchet.harness.described_spec import inline_spec
from kernel_ratchet.harness.description import Description
from kernel_ratchet.harness.symbolic import TensorSpec, evaluate
from tests.harness.described_helpers import DESC, OPS, SHAPES, _adapter, _check


def test_outputs_and_gradients_match_the_reference_in_the_shapes_dtype():
    adapter = _adapter()
    bf, f32 = load_shapes(inline_spec(SHAPES))
    got, res = _check(adapter, bf)
    assert res.passed, res.reason
    assert set(got) == {"y", "dx", "dweight"}
    assert got["dx"].dtype == torch.bfloat16 and got["dweight"].dtype == torch.float32
    assert adapter.threshold("dx") == 40.0 and adapter.threshold("dweight") == 80.0
    assert _check(adapter, f32)[1].passed


def test_a_wrong_kernel_fails_and_tolerance_overrides_by_dtype():
    res = _check(_adapter(function=f"{OPS}:rms_norm_wrong"), load_shapes(inline_spec(SHAPES))[0])
    assert not res[1].passed
    loose = _adapter(tolerance={"bf16": 10, "dx": 5})
    _check(loose, load_shapes(inline_spec(SHAPES))[0])
    assert loose.threshold("dx") == 5.0 and loose.threshold("y") == 10.0
    assert loose.threshold("dweight") == 80.0  # float32: the SPEC value


def test_backward_is_timed_alone_and_repeatable_from_one_forward():
    adapter = _adapter()
    case = adapter.make_case(load_shapes(inline_spec(SHAPES))[1], 3, "cpu")
    adapter.forward(case)
    first, second = adapter.backward(case), adapter.backward(case)
    assert all(torch.equal(a, b) and a is not b for a, b in zip(first, second, strict=True))
    again = adapter.make_case(load_shapes(inline_spec(SHAPES))[1], 3, "cpu")
    assert torch.equal(again.x, case.x)  # same seed, same inputs


def test_work_from_expressions_and_from_the_bytes_of_inputs_and_outputs():
    adapter = _adapter()
    bf = load_shapes(inline_spec(SHAPES))[0]
    x, w, y = 5 * 33 * 2, 33 * 4, 5 * 33 * 4  # reference on meta tensors: y in float32
    assert adapter.bytes_moved(bf) == (x + w + y, y + x + w + x + w)
    assert adapter.flops(bf) == (4 * 5 * 33, 2 * 4 * 5 * 33)
    declared = _adapter(outputs={"y": "[M, N] dtype"}, bytes={"fwd": "io", "bwd": "3*M*N"})
    assert declared.bytes_moved(bf) == (x + w + 5 * 33 * 2, 3 * 5 * 33)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"inputs": {"x": "M, N bfloat16"}}, "inputs.x"),
        ({"inputs": {"x": "[M, N] bfloat17"}}, "inputs.x"),
        ({"gradients": ["z"]}, "gradients"),
        ({"flops": "__import__('os')"}, "flops"),
        ({"function": "no_colon"}, "function"),
        ({"tolerance": {"fp9": 3}}, "tolerance.fp9"),
        ({"inplace_outputs": ["q"]}, "inplace_outputs"),
    ],
)
def test_a_bad_description_names_its_key(change, key):
    with pytest.raises(ValueError, match=rf"^{key}:"):
        Description.from_dict({**DESC, **change})


def test_a_function_that_cannot_be_imported_is_a_profile_error():
    with pytest.raises(ProfileError, match="cannot be imported"):
        _adapter(function="no_such_package.ops:f")
    # the module imports: the message names what it does define, not the install
    with pytest.raises(ProfileError, match="imports, but has no 'missing'") as exc:
        _adapter(function=f"{OPS}:missing")
    assert "pip install" not in str(exc.value)
    # a method of a class: the class lacks it, and its inherited names count
    with pytest.raises(ProfileError, match=r"Function of torch.autograd.function has no 'aply'"):
        _adapter(function="torch.autograd.function:Function.aply")
    with pytest.raises(ProfileError, match=r"\(it has apply, "):
        _adapter(function="torch.autograd.function:Function.aply")


def test_symbols_and_expressions():
    spec = TensorSpec.parse("[T, 3, D] bf16")
    assert spec.size({"T": 2, "D": 5}) == (2, 3, 5) and spec.dtype == "bfloat16"
    assert evaluate("2*M*(N+1)//2", {"M": 3, "N": 5}) == 18.0
    extra = load_shapes(inline_spec([{"label": "t", "T": 9, "D": 4}]))[0]
    assert extra.params == {"T": 9, "D": 4} and extra.M == 1


def test_timed_outputs_are_matched_to_their_reference_names():
    """What forward and backward return is named for the checks of timed calls (the spot
    checks and the harness's last-call check), so they compare instead of skipping."""
    from kernel_ratchet.harness import anticheat as ac
    from kernel_ratchet.harness.timed_checks import match_outputs

    adapter = _adapter()
    case = adapter.make_case(load_shapes(inline_spec(SHAPES))[1], 3, "cpu")
    ref = adapter.reference(case)
    fwd = ac.output_tensors(adapter.forward(case), "forward()")
    bwd = ac.output_tensors(adapter.backward(case), "backward()")
    assert set(match_outputs(fwd, ref, "fwd", adapter.returned_names("fwd"))) == {"y"}
    pairs = match_outputs(bwd, ref, "bwd", adapter.returned_names("bwd"))
    assert set(pairs) == {"dx", "dweight"} and pairs["dweight"].shape == case.weight.shape
    assert match_outputs(bwd, ref, "bwd") == {}  # without the names: nothing to compare


def test_constants_after_the_inputs_are_passed_positionally():
    adapter = _adapter(function=f"{OPS}:rms_norm_positional", args=[1.0e-6])
    assert _check(adapter, load_shapes(inline_spec(SHAPES))[1])[1].passed
    with pytest.raises(ValueError, match="args: expected a list of constants"):
        _adapter(args={"eps": 1.0e-6})


def test_the_csv_out_snr_is_the_first_named_output(tmp_path):
    from kernel_ratchet.harness.csv_schema import SCHEMAS, read_csv, write_csv
    from kernel_ratchet.harness.runtime import result_cells, run_shape
    from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine

    adapter, shape = _adapter(), load_shapes(inline_spec(SHAPES))[1]
    r = run_shape(adapter, shape, PerfCounterEngine(samples=2), seed=3, device="cpu")
    memory = SCHEMAS["memory"]
    write_csv(tmp_path / "b.csv", memory, [result_cells(memory, adapter, r)])
    (row,) = read_csv(tmp_path / "b.csv").rows
    assert row.snr["out_snr"] == pytest.approx(r.snr["y"], abs=0.01) and r.snr["y"] > 80


@pytest.mark.parametrize(
    ("roles", "fresh_weights"), [(None, True), ({"x": "activation", "weight": "weight"}, False)]
)
def test_without_roles_every_input_is_fresh_in_the_training_idiom(roles, fresh_weights):
    """A described op runs the transfer check without ``roles``: every input is then a new
    tensor every training step; a declared weight keeps its identity."""
    from kernel_ratchet.harness import training_sim
    from tests.harness import described_ops

    adapter = _adapter(function=f"{OPS}:rms_norm_seen", roles=roles or {})
    sim = training_sim._Simulation(adapter, load_shapes(inline_spec(SHAPES))[1], "cpu", 3, 0)
    described_ops.SEEN.clear()
    sim.trace("train")
    xs, ws = zip(*described_ops.SEEN, strict=True)
    assert len(set(xs)) == 3 and len(set(ws)) == (3 if fresh_weights else 1)


def test_gradients_of_a_function_without_a_backward_say_so():
    adapter = _adapter(function=f"{OPS}:rms_norm_no_graph")
    case = adapter.make_case(load_shapes(inline_spec(SHAPES))[1], 7, "cpu")
    adapter.forward(case)
    with pytest.raises(ProfileError, match="carries an autograd graph: the function has no back"):
        adapter.backward(case)


def test_a_dimension_may_be_arithmetic_over_the_symbols():
    """A gated activation's input is [M, 2*N]: the relation holds on every shape, rehearsal
    shapes included, and a dimension that is not a whole number is refused by name."""
    adapter = _adapter(
        function=f"{OPS}:silu_and_mul",
        reference=f"{OPS}:silu_and_mul_ref",
        inputs={"x": "[M, 2*N] dtype"},
        gradients=["x"],
    )
    shape = load_shapes(inline_spec([{"label": "g", "M": 3, "N": 5, "dtype": "float32"}]))[0]
    case = adapter.make_case(shape, 7, "cpu")
    assert tuple(case.x.shape) == (3, 10)
    got, res = _check(adapter, shape)
    assert res.passed and tuple(got["y"].shape) == (3, 5), res.reason
    assert TensorSpec.parse("[M, 2*N] bf16").symbols == {"M", "N"}
    with pytest.raises(ValueError, match="not a non-negative whole number"):
        TensorSpec.parse("[N/3] bf16").size({"N": 4})
    with pytest.raises(ValueError, match="arithmetic over symbols"):
        TensorSpec.parse("[max(M, N)] bf16")


def test_inline_shapes_take_sizes_by_symbol_as_ratchet_yaml_does():
    """`ratchet init --shapes 'inline:[...]'` reads a shape as the op's shapes are written (a
    vocabulary V beside N), and a recorded shape (sizes under params) as before."""
    from kernel_ratchet.harness.described_spec import inline_shapes

    (s,) = inline_shapes('inline:[{"label": "x", "N": 8, "V": 150, "dtype": "float32"}]')
    assert (s.N, s.params, s.dtype) == (8, {"V": 150}, "float32")
    (r,) = inline_shapes(inline_spec([{"label": "y", "N": 8, "V": 150}]))
    assert r == Shape(label="y", M=1, N=8, params={"V": 150})
    with pytest.raises(ProfileError, match="gives no size"):
        inline_shapes('inline:[{"label": "x"}]')


def test_a_constant_written_as_an_expression_follows_each_shape():
    adapter = _adapter(
        function=f"{OPS}:group_scale",
        reference=f"{OPS}:group_scale_ref",
        inputs={"x": "[M, G*NG] float32"},
        outputs=["y"],
        gradients=[],
        kwargs={"group_size": "${G}"},
        reference_kwargs={"group_size": "${G}"},
    )
    shapes = load_shapes(
        inline_spec(
            [
                {"label": "g16", "M": 4, "G": 16, "NG": 3},
                {"label": "g48", "M": 4, "G": 48, "NG": 2},
            ]
        )
    )
    for shape in shapes:  # a fixed group size would fail the assert on one of them
        got, res = _check(adapter, shape)
        assert res.passed and got["y"].shape[-1] == shape.params["G"] * shape.params["NG"]
    with pytest.raises(ValueError, match="not an arithmetic expression"):
        Description.from_dict({**DESC, "kwargs": {"eps": "${1 +}"}})
    assert Description.from_dict({**DESC, "kwargs": {"k": "${N // 2}"}}).constant_symbols == {"N"}
