"""The adapter generated from an op described in ratchet.yaml: inputs from symbolic shapes and
dtypes, outputs and gradients against the reference, thresholds per dtype, work formulas."""

from __future__ import annotations

import re

import pytest
import torch

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import Shape, load_adapter, load_shapes
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.described_spec import described_spec, inline_spec
from kernel_ratchet.harness.description import Description
from kernel_ratchet.harness.symbolic import TensorSpec, evaluate

OPS = "tests.harness.described_ops"
DESC = {
    "function": f"{OPS}:rms_norm",
    "reference": f"{OPS}:rms_norm_ref",
    "inputs": {"x": "[M, N] dtype", "weight": "[N] float32"},
    "outputs": ["y"],
    "gradients": ["x", "weight"],
    "bytes": "io",
    "flops": "4*M*N",
}
SHAPES = [
    {"label": "bf", "M": 5, "N": 33, "dtype": "bfloat16"},
    {"label": "f32", "M": 3, "N": 8, "dtype": "float32"},
]


def _adapter(**changes):
    return load_adapter(described_spec({**DESC, **changes}, "memory"))


def _check(adapter, shape):
    case = adapter.make_case(shape, 7, "cpu")
    got, ref = adapter.outputs(case), adapter.reference(case)
    return got, check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})


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


@pytest.mark.parametrize(
    "text,why",
    [("[N] float32 < V", "integer inputs only"), ("[N] int64 < V +", "neither an int")],
)
def test_a_bound_on_values_is_for_integers_and_arithmetic(text, why):
    with pytest.raises(ValueError, match=why):
        TensorSpec.parse(text)


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


def test_an_output_in_a_lower_precision_than_the_op_is_held_to_the_ops_bar():
    """An fp32 op whose kernel hands back bf16 (55 dB) is judged at fp32's 80 dB, not at the
    40 dB of the dtype it chose; on bf16 shapes the same function passes."""
    adapter = _adapter(function=f"{OPS}:rms_norm_bf16_out")
    bf, f32 = load_shapes(inline_spec(SHAPES))
    got, res = _check(adapter, f32)
    assert got["y"].dtype == torch.bfloat16 and not res.passed, res.reason
    assert adapter.threshold("y") == 80.0
    assert _check(adapter, bf)[1].passed


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
    assert not wrong.passed and "values its indices select" in wrong.reason


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
