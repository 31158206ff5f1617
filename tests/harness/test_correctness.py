"""SNR / relative-error metrics and the per-output check (kernel_ratchet.harness.correctness)."""

from __future__ import annotations

import math

import pytest
import torch

from kernel_ratchet.harness.correctness import (
    assert_close,
    check_outputs,
    rel_err,
    snr_db,
    worst_slice,
)


def _ref(n: int = 64) -> torch.Tensor:
    return torch.randn(n, n, generator=torch.Generator().manual_seed(0))


def test_identical_tensors_are_infinite_snr():
    r = _ref()
    assert snr_db(r.clone(), r) == math.inf
    assert rel_err(r.clone(), r) == 0.0


def test_relative_error_one_percent_is_40_db():
    ref = torch.ones(100, 100)
    assert snr_db(torch.full((100, 100), 1.01), ref) == pytest.approx(40.0, abs=1e-3)
    assert rel_err(torch.full((100, 100), 1.01), ref) == pytest.approx(1e-2, rel=1e-4)


def test_relative_error_1e4_is_80_db_in_float64():
    ref = torch.ones(1000, dtype=torch.float64)
    assert snr_db(ref * (1 + 1e-4), ref) == pytest.approx(80.0, abs=1e-6)


def test_low_precision_output_is_compared_in_float64():
    ref = _ref().double()
    out = ref.to(torch.bfloat16)
    s = snr_db(out, ref)
    # bf16 keeps 8 mantissa bits: relative error ~2^-9, i.e. ~50 dB; clearly finite, > 40 dB.
    assert 40.0 < s < 70.0


def test_snr_is_not_symmetric_in_scale():
    ref = torch.ones(10)
    assert snr_db(ref * 2, ref) == pytest.approx(0.0, abs=1e-9)  # noise = signal
    assert snr_db(ref * 1.1, ref) == pytest.approx(20.0, abs=1e-4)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_nonfinite_output_is_minus_infinity(bad):
    out = _ref().clone()
    out[3, 5] = bad
    assert snr_db(out, _ref()) == -math.inf
    assert rel_err(out, _ref()) == math.inf


def test_shape_mismatch_is_minus_infinity_even_when_broadcastable():
    ref = torch.ones(4, 4)
    assert snr_db(torch.ones(4), ref) == -math.inf
    assert snr_db(torch.ones(16), ref) == -math.inf
    assert snr_db(torch.ones(1, 4, 4), ref) == -math.inf
    res = check_outputs({"out": torch.ones(1, 4, 4)}, {"out": ref}, {"out": 80.0})
    assert not res.passed and res.reason == "out: shape [1, 4, 4] against the reference's [4, 4]"


def test_tensor_subclass_and_non_tensor_are_minus_infinity():
    class Sneaky(torch.Tensor):
        pass

    ref = torch.ones(4)
    sub = torch.ones(4).as_subclass(Sneaky)
    assert torch.equal(torch.Tensor(sub), ref)  # numerically identical, still rejected
    assert snr_db(sub, ref) == -math.inf
    assert snr_db([1.0, 1.0, 1.0, 1.0], ref) == -math.inf


def test_zero_reference_with_nonzero_output_is_minus_infinity():
    assert snr_db(torch.ones(3), torch.zeros(3)) == -math.inf
    assert snr_db(torch.zeros(3), torch.zeros(3)) == math.inf


def test_check_outputs_passes_within_thresholds():
    ref = {"out": torch.ones(8), "da": torch.ones(8)}
    got = {"out": torch.ones(8), "da": torch.full((8,), 1.001)}  # 60 dB
    res = check_outputs(got, ref, {"out": 80.0, "da": 40.0})
    assert res.passed
    assert res.snr["out"] == math.inf and res.snr["da"] == pytest.approx(60.0, abs=0.01)


def test_check_outputs_names_missing_and_each_failing_output():
    ref = {"out": torch.ones(8), "da": torch.ones(8), "db": torch.ones(8), "dc": torch.ones(8)}
    got = {
        "out": torch.full((8,), 1.1),  # 20 dB
        "da": torch.ones(8),  # exact
        "dc": torch.full((8,), math.nan),
    }
    res = check_outputs(got, ref, {"out": 40.0, "da": 40.0, "db": 40.0, "dc": 40.0})
    assert not res.passed
    assert "db: missing" in res.reason
    assert "out: SNR 20.00 dB < 40.0 dB" in res.reason
    assert "dc: SNR -inf dB" in res.reason
    assert "da:" not in res.reason  # the passing output is not blamed
    assert res.snr["db"] == -math.inf and res.snr["da"] == math.inf


def test_check_outputs_threshold_is_inclusive_and_nan_never_passes():
    ref = {"out": torch.ones(10)}
    got = {"out": torch.full((10,), 1.1)}
    s = snr_db(got["out"], ref["out"])
    assert check_outputs(got, ref, {"out": s}).passed
    assert not check_outputs(got, ref, {"out": s + 1e-9}).passed
    nan_ref = {"out": torch.full((10,), math.nan)}
    assert not check_outputs({"out": torch.ones(10)}, nan_ref, {"out": -1e9}).passed


def test_assert_close_lists_every_tensor():
    ref = {"out": torch.ones(8), "da": torch.ones(8), "db": torch.ones(8)}
    got = {"out": torch.ones(8), "da": torch.full((8,), 1.1), "db": torch.full((8,), 1.01)}
    with pytest.raises(AssertionError) as exc:
        assert_close(got, ref, 30.0)
    msg = str(exc.value)
    assert "below 30.0 dB" in msg
    assert "out: snr=inf dB rel_err=0.000e+00" in msg
    assert "da: snr=20.00 dB rel_err=1.000e-01" in msg
    assert "db: snr=40.00 dB rel_err=1.000e-02" in msg


def test_assert_close_passes_silently():
    ref = {"out": torch.ones(8)}
    assert_close({"out": torch.full((8,), 1.001)}, ref, 50.0)
    with pytest.raises(AssertionError):
        assert_close({"out": torch.full((8,), 1.001)}, ref, 70.0)


def test_chunked_sums_equal_one_pass_and_find_nan_in_any_chunk(monkeypatch):
    from kernel_ratchet.harness import correctness

    g = torch.Generator().manual_seed(3)
    ref = torch.randn(37, 29, generator=g, dtype=torch.float64)
    out = (ref + 1e-3 * torch.randn(37, 29, generator=g, dtype=torch.float64)).t().contiguous().t()
    whole = snr_db(out, ref)  # non-contiguous output, one chunk
    monkeypatch.setattr(correctness, "CHUNK", 100)  # 11 chunks, the last one partial
    assert snr_db(out, ref) == pytest.approx(whole, rel=1e-12)
    assert 55 < whole < 65
    out[-1, -1] = math.nan  # only in the last, partial chunk
    assert snr_db(out, ref) == -math.inf


def _bf16_of(ref: torch.Tensor) -> torch.Tensor:
    return ref.to(torch.bfloat16).to(ref.dtype)


def test_a_row_never_written_fails_though_the_whole_output_passes():
    ref = torch.randn(16384, 64, generator=torch.Generator().manual_seed(1))
    out = _bf16_of(ref)
    out[1234] = 0.0
    assert snr_db(out, ref) > 40.0  # one row in 16384 costs the whole tensor ~0.3 dB
    res = check_outputs({"y": out}, {"y": ref}, {"y": 40.0})
    assert not res.passed
    assert res.reason.startswith("y: y[1234, :] at SNR 0.00 dB < 30.0 dB")
    assert res.snr["y"] > 40.0  # the recorded SNR stays the whole tensor's


def test_a_column_written_in_the_wrong_place_fails():
    ref = torch.randn(64, 16384, generator=torch.Generator().manual_seed(2))
    out = _bf16_of(ref)
    out[:, 9000] = out[:, 9001]  # a tail tile off by one column
    res = check_outputs({"y": out}, {"y": ref}, {"y": 40.0})
    assert not res.passed and "y[:, 9000] at SNR" in res.reason


def test_honest_rounding_passes_on_rows_of_any_scale_and_exact_zero_rows():
    g = torch.Generator().manual_seed(3)
    scale = 10.0 ** (8 * torch.rand(4096, 1, generator=g) - 4)  # rows from 1e-4 to 1e4
    ref = torch.randn(4096, 48, generator=g) * scale
    ref[::97] = 0.0  # rows the reference leaves at zero (masked, ignored targets)
    assert check_outputs({"y": _bf16_of(ref)}, {"y": ref}, {"y": 40.0}).passed
    d, _, _, db = worst_slice(_bf16_of(ref), ref)
    assert d in (0, 1) and 40.0 < db < 70.0


def test_a_small_slice_near_zero_is_held_to_the_tensor_scale():
    ref = torch.randn(512, 64, generator=torch.Generator().manual_seed(4))
    ref[7] *= 1e-6  # its own SNR is poor after an absolute 1e-5 error, the tensor's is not
    out = ref + 1e-5 * torch.randn(512, 64, generator=torch.Generator().manual_seed(5))
    assert check_outputs({"y": out}, {"y": ref}, {"y": 80.0}).passed


def test_short_slices_are_judged_by_runs_of_consecutive_indices():
    """Rows of 15 are judged two at a time, a 1-D output sixteen entries at a time: a last row
    or entry never written fails though the whole tensor passes; one slice in all is none."""
    ref = torch.randn(16384, 15, generator=torch.Generator().manual_seed(9))
    out = _bf16_of(ref)
    assert check_outputs({"y": out}, {"y": ref}, {"y": 40.0}).passed
    out[-1] = 0.0
    res = check_outputs({"y": out}, {"y": ref}, {"y": 40.0})
    assert snr_db(out, ref) > 40.0 and "y[16382:16384, :] at SNR" in res.reason, res.reason
    flat = torch.randn(16384, generator=torch.Generator().manual_seed(10))
    cut = _bf16_of(flat)
    cut[-1] = 0.0
    assert "y[16368:16384] at SNR" in check_outputs({"y": cut}, {"y": flat}, {"y": 40.0}).reason
    assert worst_slice(torch.ones(16), torch.ones(16)) is None  # one run of sixteen
    assert worst_slice(torch.ones(()), torch.ones(())) is None


def test_an_infinite_reference_must_be_matched_position_by_position():
    ref = torch.randn(64, 32, generator=torch.Generator().manual_seed(6))
    ref[3, 0], ref[9] = -math.inf, math.inf
    same = ref.clone()
    same[0, 0] += 1e-3
    assert 60.0 < snr_db(same, ref) < math.inf  # the finite positions alone
    assert check_outputs({"y": same}, {"y": ref}, {"y": 40.0}).passed
    for value in (0.0, math.nan, math.inf):
        wrong = same.clone()
        wrong[3, 0] = value  # where the reference is -inf
        assert snr_db(wrong, ref) == -math.inf, value


def test_nan_never_passes_even_where_the_reference_is_nan():
    """NaN is the poison that finds outputs never written: an op must return numbers."""
    ref = torch.randn(64, 32, generator=torch.Generator().manual_seed(7))
    ref[5, 1] = math.nan
    assert snr_db(ref.clone(), ref) == -math.inf


def test_torch_softmax_backward_in_bf16_passes_over_a_large_vocabulary():
    """Near-one-hot rows over 50257 columns (logits of scale 30): the bf16 output a backward
    reads rounds p = 0.998 to 1, and the columns the rows leave near zero keep that error.
    Against the mean column energy (total / 50257) one such column read 13 dB; against the
    energy of the columns that hold the signal it passes, as torch's own backward must."""
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(33, 50257, generator=g) * 30).to(torch.bfloat16)
    dy = torch.randn(33, 50257, generator=g).to(torch.bfloat16)
    xb, xf = x.clone().requires_grad_(), x.float().requires_grad_()
    (dx,) = torch.autograd.grad(torch.softmax(xb, -1), xb, dy)
    (ref,) = torch.autograd.grad(torch.softmax(xf, -1), xf, dy.float())
    res = check_outputs({"dx": dx}, {"dx": ref}, {"dx": 40.0})
    assert res.passed, res.reason


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("ref_nan", "the reference holds NaN at 2 positions, first y[1, 2]; NaN never passes"),
        ("out_nan", "the output holds NaN at 1 position, first y[3, 4]"),
        (
            "out_inf",
            "the output holds Inf where the reference is finite at 1 position, first y[0, 9]",
        ),
        ("zero_ref", "the reference is all zero and the output is not"),
    ],
)
def test_a_minus_infinite_snr_says_which_value_made_it(where, says):
    ref = torch.randn(8, 16, generator=torch.Generator().manual_seed(8))
    out = ref.clone()
    if where == "ref_nan":
        ref[1, 2] = ref[5, 0] = math.nan
    elif where == "out_nan":
        out[3, 4] = math.nan
    elif where == "out_inf":
        out[0, 9] = math.inf
    else:
        ref.zero_()
    res = check_outputs({"y": out}, {"y": ref}, {"y": 40.0})
    assert "y: SNR -inf dB < 40.0 dB (" + says in res.reason, res.reason


def test_an_integer_output_off_by_one_fails_though_its_values_snr_is_high():
    ref = torch.randint(0, 50000, (64, 8), generator=torch.Generator().manual_seed(0))
    assert snr_db((ref + 1).double(), ref.double()) > 80  # as values it would pass 80 dB
    res = check_outputs({"i": ref + 1}, {"i": ref}, {"i": math.inf})
    assert not res.passed and res.snr["i"] == 0.0
    assert "512 of 512 values differ" in res.reason and "gathers=" in res.reason
    assert check_outputs({"i": ref.clone()}, {"i": ref}, {"i": math.inf}).snr["i"] == math.inf


def test_an_integer_output_may_differ_in_the_share_its_bar_allows():
    ref = torch.arange(1000).reshape(100, 10)
    got = ref.clone()
    got.view(-1)[::200] += 1  # 5 of 1000 entries: 10*log10(1000/5) = 23.0 dB
    res = check_outputs({"t": got}, {"t": ref}, {"t": 20.0})
    assert res.passed and res.snr["t"] == pytest.approx(23.01, abs=0.01)
    strict = check_outputs({"t": got}, {"t": ref}, {"t": 30.0})
    assert not strict.passed and "first t[0, 0]: 1 against 0" in strict.reason
    mask = torch.zeros(40, dtype=torch.bool)
    assert not check_outputs({"m": ~mask}, {"m": mask}, {"m": math.inf}).passed


def test_an_infinite_bar_holds_a_float_output_to_equality():
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    near = x.clone()
    near[5, 1] = near[5, 1] + 0.25  # x * 1.01 + 0.01 rounds back to x in bf16 where x = -1
    assert near[5, 1] != x[5, 1]
    res = check_outputs({"v": near}, {"v": x}, {"v": math.inf})
    assert not res.passed and "1 of 128 values differ" in res.reason
    assert check_outputs({"v": x.clone()}, {"v": x}, {"v": math.inf}).passed
