"""ratchet.yaml ops described without an adapter, shapes listed in place, rehearsal shapes,
and the exit code of an unknown op."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from kernel_ratchet.errors import ProfileError, UnknownOpError
from kernel_ratchet.harness.adapter import Shape, load_adapter, load_shapes
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.rehearsal import INDEX_MIN, rehearsal_profile, shrink

OP = {
    "kernel_source": ["k.py"],
    "backend": "TRITON",
    "lang": "triton",
    "campaign_type": "memory",
    "test": "python -m kernel_ratchet.profile.focused norm",
    "function": "tests.harness.described_ops:rms_norm",
    "reference": "tests.harness.described_ops:rms_norm_ref",
    "inputs": {"x": "[M, N] dtype", "weight": "[N] float32"},
    "outputs": ["y"],
    "gradients": ["x", "weight"],
    "bytes": "io",
    "shapes": [{"label": "big", "M": 4096, "N": 4095, "dtype": "bfloat16"}],
}
TOP = {
    "project": "p",
    "package": "p",
    "install": "pip install -e .",
    "full_test": "pytest",
    "campaign_root": ".ratchet/campaigns",
    "tips_root": "tips",
}


def _write(tmp_path, **op_changes):
    op = {k: v for k, v in {**OP, **op_changes}.items() if v is not None}
    (tmp_path / "k.py").write_text("")
    path = tmp_path / "ratchet.yaml"
    path.write_text(yaml.safe_dump({**TOP, "ops": {"norm": op}}, sort_keys=False))  # in order
    return path


def test_a_described_op_loads_without_adapter_and_benchmark(tmp_path):
    prof = load_profile(_write(tmp_path))
    o = prof.op("norm")
    assert o.benchmark is None
    adapter, (shape,) = load_adapter(o.adapter), load_shapes(o.shapes)
    assert adapter.schema == "memory" and adapter.has_backward
    assert (shape.M, shape.N, shape.dtype) == (4096, 4095, "bfloat16")


def test_a_bad_description_is_one_problem_line_naming_the_key(tmp_path):
    try:
        load_profile(_write(tmp_path, inputs={"x": "[M, N]"}, adapter="a.b:C"))
    except ProfileError as exc:
        msg = str(exc)
    assert "ops.norm.adapter: both adapter and function" in msg
    try:
        load_profile(_write(tmp_path, inputs={"x": "[M, N]"}))
    except ProfileError as exc:
        msg = str(exc)
    assert "ops.norm.inputs.x:" in msg and "bfloat16" in msg


def test_rehearsal_shapes_are_given_or_shrunk(tmp_path):
    prof = load_profile(_write(tmp_path))
    (small,) = load_shapes(rehearsal_profile(prof, "norm").op("norm").shapes)
    assert (small.label, small.M, small.N) == ("big", shrink(4096), shrink(4095))
    assert max(small.M, small.N) < 64 and small.dtype == "bfloat16"
    given = [{"label": "tiny", "M": 3, "N": 7}]
    prof = load_profile(_write(tmp_path, rehearse_shapes=given))
    (tiny,) = load_shapes(rehearsal_profile(prof, "norm").op("norm").shapes)
    assert (tiny.label, tiny.M, tiny.N) == ("tiny", 3, 7)


def test_a_target_shape_small_enough_for_the_cpu_is_rehearsed_as_it_is(tmp_path):
    """Shrinking 64 x 128 to 48 x 48 would break a width kept a multiple of a group size."""
    shapes = [{"label": "s", "M": 64, "N": 128, "dtype": "float32"}, OP["shapes"][0]]
    prof = load_profile(_write(tmp_path, shapes=shapes))
    kept, big = load_shapes(rehearsal_profile(prof, "norm").op("norm").shapes)
    assert (kept.M, kept.N) == (64, 128) and (shrink(4096), shrink(4095)) == (big.M, big.N)


#: A cross-entropy of N rows over a vocabulary V: an op with neither M nor K.
XENT = dict(
    function="tests.harness.described_ops:cross_entropy_first_128",
    reference="tests.harness.described_ops:cross_entropy",
    inputs={"logits": "[N, V] float32", "targets": "[N] int64 < V"},
    outputs=["loss"],
    gradients=["logits"],
    shapes=[{"label": "llama", "N": 4096, "V": 32000}],
    bytes=None,
)


def test_rehearsal_shapes_carry_only_the_symbols_the_ops_shapes_have(tmp_path):
    """The shrunk shapes `ratchet init --rehearse` shows and records: an op of M and N has no
    `K: 0` (nor `B: 1`), one of N and V no `M: 1` either."""
    for op, sizes in (({}, {"M": shrink(4096), "N": shrink(4095)}), (XENT, {"N": shrink(4096)})):
        prof = rehearsal_profile(load_profile(_write(tmp_path, **op)), "norm")
        (entry,) = json.loads(prof.op("norm").shapes.removeprefix("inline:"))
        assert {k: v for k, v in entry.items() if k in ("M", "N", "K", "B")} == sizes, entry
        assert set(entry) - {"M", "N", "K", "B"} <= {"label", "dtype", "V"}, entry
    # a module's Shape (a bundled op's) has no symbols written: M, N and those off 0 and 1
    from kernel_ratchet.harness.described_spec import inline_shapes, written

    shapes = [Shape("s", M=4, N=8), Shape("g", M=4, N=8, K=16, B=2, params={"dist": "skewed"})]
    assert written(shapes[0]) == {"label": "s", "M": 4, "N": 8}
    assert inline_shapes("inline:" + json.dumps([written(s) for s in shapes])) == shapes


def test_a_size_that_bounds_an_integer_input_keeps_indices_past_255(tmp_path):
    """Shrunk for a rehearsal, a vocabulary V that bounds the targets keeps INDEX_MIN values:
    a kernel that keeps a class id in 7 or 8 bits still meets ids it gets wrong."""
    xent = XENT
    prof = load_profile(_write(tmp_path, **xent))
    (small,) = load_shapes(rehearsal_profile(prof, "norm").op("norm").shapes)
    assert (small.N, INDEX_MIN <= small.params["V"] < 32000) == (shrink(4096), True)
    adapter = load_adapter(rehearsal_profile(prof, "norm").op("norm").adapter)
    case = adapter.make_case(small, 1, "cpu")
    assert int(case.targets.max()) >= 128  # the wrong kernel now fails its check
    loose = {**xent, "inputs": {"logits": "[N, V] float32", "targets": "[N] int64"}}
    (unbound,) = load_shapes(
        rehearsal_profile(load_profile(_write(tmp_path, **loose)), "norm").op("norm").shapes
    )
    assert unbound.params["V"] == shrink(32000) < 64  # nothing says V is an index range


def test_the_cpu_check_adds_shapes_that_cross_a_tile_in_one_size(tmp_path):
    """Shrunk sizes stay under 64, so a loop over tiles of 64 or 128 never ran twice: the
    built-in check adds the largest shape with one size at a time in [128, 256)."""
    from kernel_ratchet.profile.rehearsal import check_shapes

    prof = load_profile(_write(tmp_path))
    small, rows, cols = check_shapes(prof, "norm")
    assert (shrink(4096), shrink(4095)) == (small.M, small.N)
    assert (rows.label, rows.M, rows.N) == ("big.M128", 128, small.N)
    assert (cols.label, cols.M, cols.N) == ("big.N255", small.M, 255)  # 4095 % 128 kept
    given = [{"label": "tiny", "M": 3, "N": 7}]
    (tiny,) = check_shapes(load_profile(_write(tmp_path, rehearse_shapes=given)), "norm")
    assert tiny.label == "tiny"  # the user's own rehearsal shapes, as given


def test_an_unknown_op_is_a_ratchet_yaml_problem(tmp_path):
    prof = load_profile(_write(tmp_path))
    with pytest.raises(UnknownOpError) as exc:
        prof.op("nope")
    assert exc.value.exit_code == 3 and "known ops: norm" in str(exc.value)


def test_the_focused_test_fails_a_shape_that_raises_and_runs_the_others(tmp_path, capsys):
    from kernel_ratchet.profile.focused import run

    shapes = [{"label": "even", "M": 4, "N": 8}, {"label": "odd", "M": 5, "N": 8}]
    path = _write(
        tmp_path,
        function="tests.harness.described_ops:rms_norm_odd_rows_only",
        shapes=[{**s, "dtype": "float32"} for s in shapes],
        rehearse_shapes=[{**s, "dtype": "float32"} for s in shapes],
    )
    assert run("norm", path.parent) == 1
    out = capsys.readouterr()
    assert "FAIL even (M=4, N=8): RuntimeError: invalid grid: even rows" in out.out
    assert "PASS odd (M=5, N=8):" in out.out and "1 passed, 1 failed" in out.out
    assert "Traceback" in out.err


def test_the_cpu_device_check_counts_every_size_symbol_of_a_described_op(tmp_path):
    """A loss over a vocabulary: M rows of V logits. Counted as M alone (N and K absent), its
    real shapes would pass for CPU-sized and start a campaign that takes hours a round."""
    from kernel_ratchet.profile.checklist import device_check

    inputs = {"logits": "[M, V] dtype", "weight": "[V] float32"}
    shapes = [{"label": "llama3", "M": 8192, "V": 128256, "dtype": "bfloat16"}]
    prof = load_profile(_write(tmp_path, inputs=inputs, shapes=shapes, gradients=["logits"]))
    item = device_check(prof, "norm", cuda=False)
    assert not item.ok and "1.1e+09" in item.detail and "every size symbol" in item.detail
    tiny = [{"label": "t", "M": 37, "V": 200, "dtype": "float32"}]
    prof = load_profile(_write(tmp_path, inputs=inputs, shapes=tiny, gradients=["logits"]))
    assert device_check(prof, "norm", cuda=False).ok


def test_the_focused_test_says_why_a_shape_failed_beyond_its_snrs(tmp_path, capsys):
    from kernel_ratchet.profile.focused import run

    shape = {"label": "rows", "M": 16384, "N": 32, "dtype": "bfloat16"}
    path = _write(
        tmp_path,
        function="tests.harness.described_ops:rms_norm_skips_last_row",
        gradients=None,
        shapes=[shape],
        rehearse_shapes=[shape],
    )
    assert run("norm", path.parent) == 1
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("FAIL"))
    assert (
        line.startswith("FAIL rows (M=16384, N=32): y 4") and "(y: y[16383, :] at SNR 0." in line
    ), line


def test_the_focused_test_notes_an_output_held_to_a_dtype_nothing_declared(tmp_path, capsys):
    from kernel_ratchet.profile.focused import run

    shape = {"label": "q", "M": 32, "N": 256, "dtype": "bfloat16"}
    path = _write(
        tmp_path,
        function="tests.harness.described_ops:quantize_rows",
        reference="tests.harness.described_ops:quantize_rows_ref",
        inputs={"x": "[M, N] dtype"},
        outputs=["q"],
        gradients=None,
        shapes=[shape],
        rehearse_shapes=[shape],
    )
    run("norm", path.parent)
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and 'declare it: outputs: {q: "[...] float8_e4m3fn"}' in notes[0]


def test_the_cpu_shapes_the_device_check_offers_keep_the_dtype_and_start_a_campaign(tmp_path):
    """Without its dtype, the offered inline shape failed only at BASELINE ('a tensor declared
    with dtype "dtype" needs shapes that give a dtype')."""
    from kernel_ratchet.profile.device_check import device_check

    prof = load_profile(
        _write(tmp_path, shapes=[{"label": "big", "M": 65536, "N": 8192, "dtype": "bfloat16"}])
    )
    item = device_check(prof, "norm", cuda=False)
    offered = item.fix.split("--shapes '", 1)[1].split("'", 1)[0]
    (shape,) = load_shapes(offered)
    assert shape.dtype == "bfloat16" and shape.M < 64 and shape.N < 64, offered
    adapter = load_adapter(prof.op("norm").adapter)
    case = adapter.make_case(shape, 0, "cpu")
    assert case.x.dtype == torch.bfloat16


def test_a_shape_must_give_the_symbols_of_an_expression_constant(tmp_path):
    with pytest.raises(ProfileError, match=r"does not give G \(G by a \$\{\.\.\.\} constant\)"):
        load_profile(_write(tmp_path, kwargs={"group_size": "${G}"}))


def test_a_compute_campaign_without_flops_is_refused_when_the_profile_loads(tmp_path):
    """Scored on TFLOP/s with nothing to count: every shape would score nan, found only at
    the baseline."""
    op = {
        "kernel_source": ["k.py"],
        "backend": "TRITON",
        "lang": "triton",
        "campaign_type": "compute_fwd_bwd",
        "test": "pytest -q",
        "function": "k:op",
        "reference": "ref:op",
        "inputs": {"x": "[M, N] dtype"},
        "outputs": ["y"],
        "bytes": "io",
        "shapes": [{"label": "a", "M": 4, "N": 8, "dtype": "float32"}],
    }
    data = {"project": "p", "package": "k", "install": "true", "full_test": "true"}
    data.update(campaign_root=".ratchet/campaigns", tips_root="tips", ops={})
    (tmp_path / "k.py").write_text("def op(x):\n    return x\n")
    data["ops"]["norm"] = op
    (tmp_path / "ratchet.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=r"ops.norm.flops: campaign_type compute_fwd_bwd"):
        load_profile(tmp_path / "ratchet.yaml")
    op["campaign_type"] = "memory"
    (tmp_path / "ratchet.yaml").write_text(yaml.safe_dump(data))
    assert load_profile(tmp_path / "ratchet.yaml").op("norm").campaign_type == "memory"


def test_a_per_shape_constant_that_is_not_arithmetic_is_named_by_its_key():
    from kernel_ratchet.harness.description import Description

    raw = {"function": "m:f", "reference": "m:g", "inputs": {"x": "[M, N] dtype"}}
    raw |= {"outputs": ["y"], "kwargs": {"normalized_shape": "${[N]}"}}
    with pytest.raises(ValueError, match=r"^kwargs.normalized_shape: .*a small wrapper"):
        Description.from_dict(raw)
    raw["kwargs"] = {"normalized_shape": "${N}"}
    assert Description.from_dict(raw).constant_symbols == {"N"}


def test_a_function_in_a_file_python_cannot_import_says_the_way_out():
    from kernel_ratchet.harness.description import Description

    raw = {"function": "02-fused-softmax:softmax", "reference": "torch:softmax"}
    raw |= {"inputs": {"x": "[M, N] dtype"}, "outputs": ["y"]}
    with pytest.raises(ValueError, match=r"^function: '02-fused-softmax' is not a name Python"):
        Description.from_dict(raw)
    raw["function"] = "tt ops:softmax"
    with pytest.raises(ValueError, match="not a name Python can import"):
        Description.from_dict(raw)
    raw["function"] = "tt_ops:"
    with pytest.raises(ValueError, match=r"expected '\[package.\]module:callable'"):
        Description.from_dict(raw)


def test_the_cpu_check_also_runs_a_cheap_shrunk_shape_as_it_is(tmp_path):
    """A size past a chunk boundary far above any tile (a vocabulary past 65536) is shrunk
    for the rehearsal; where the interpreter runs the target shape in a second or two, the
    check runs it as it is too."""
    from kernel_ratchet.profile.rehearsal import CROSSING_ELEMENTS, check_shapes

    xent = {**XENT, "shapes": [{"label": "chunk2", "N": 8, "V": 65836, "dtype": "float32"}]}
    shapes = check_shapes(load_profile(_write(tmp_path, **xent)), "norm")
    assert shapes[0].params["V"] < 65836  # the rehearsal shape, shrunk
    assert [(s.label, s.params["V"]) for s in shapes if s.label.endswith(".as-is")] == [
        ("chunk2.as-is", 65836)
    ]
    huge = {**XENT, "shapes": [{"label": "big", "N": 64, "V": CROSSING_ELEMENTS}]}
    shapes = check_shapes(load_profile(_write(tmp_path, **huge)), "norm")
    assert not [s for s in shapes if s.label.endswith(".as-is")]
