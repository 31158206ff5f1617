"""Representative-shape choice (SPEC section 5)."""

from __future__ import annotations

import pytest

from kernel_ratchet.errors import CampaignError
from kernel_ratchet.scoring.representative import choose_representative, is_skewed, is_uniform

from .conftest import gemm_row, gemm_table

# (label, M, N, K, fwd TFLOPS, relative std, check)
DENSE = [
    ("m64", 64, 64, 64, 1.0, 0.10, "PASS"),
    ("m128", 128, 128, 128, 5.0, 0.01, "PASS"),
    ("m256", 256, 256, 256, 20.0, 0.08, "PASS"),
    ("m512", 512, 512, 512, 80.0, 0.01, "PASS"),
    ("m1024", 1024, 1024, 1024, 200.0, 0.02, "PASS"),
    ("m2048", 2048, 2048, 2048, 400.0, 0.05, "PASS"),
    ("m4096", 4096, 4096, 4096, 600.0, 0.01, "PASS"),
    ("m8192", 8192, 8192, 8192, 700.0, 0.01, "PASS"),
    ("m16k", 16384, 16384, 16384, 700.0, 0.30, "FAIL"),
    ("m32", 32, 32, 32, 0.5, 0.50, "FAIL"),
]


def table(spec):
    return gemm_table(
        *(gemm_row(lab, m, n, k, v, v * r, check=c) for lab, m, n, k, v, r, c in spec)
    )


def test_covers_both_scale_ends_from_pass_rows_only():
    labels = choose_representative(table(DENSE), "compute_fwd")
    assert 3 <= len(labels) <= 5
    assert "m64" in labels and "m8192" in labels  # smallest / largest PASS work
    assert "m16k" not in labels and "m32" not in labels  # FAIL rows never chosen


def test_prefers_high_variance_shapes_spread_over_scale():
    labels = choose_representative(table(DENSE), "compute_fwd")
    assert len(labels) == 5
    # the 6 middle PASS rows (m128..m4096) form 3 scale bands of 2; the noisiest of each band
    # (m256 8%, m1024 2%, m2048 5%) joins the two scale ends; returned in table order
    assert labels == ["m64", "m256", "m1024", "m2048", "m8192"]
    assert labels == sorted(labels, key=[r[0] for r in DENSE].index)  # table order


def test_k_max_limits_and_is_deterministic():
    t = table(DENSE)
    three = choose_representative(t, "compute_fwd", k_max=3)
    assert len(three) == 3 and {"m64", "m8192"} <= set(three)
    assert three == choose_representative(t, "compute_fwd", k_max=3)


def test_few_pass_rows_returns_all_of_them():
    t = table([DENSE[0], DENSE[3], DENSE[8]])
    assert choose_representative(t, "compute_fwd") == ["m64", "m512"]


def test_no_pass_row_raises():
    with pytest.raises(CampaignError, match="no passing shape"):
        choose_representative(table([DENSE[8], DENSE[9]]), "compute_fwd")


def test_a_baseline_failing_every_shape_picks_from_all_its_rows_when_asked():
    """A BASELINE declared wrong on every shape still gets quick shapes: its rows' timings
    stand in, the scale ends and the noisiest of the middle as for passing rows; a row that
    errored (no timing) can be chosen but adds no noise to prefer it."""
    failing = [(lab, m, n, k, v, r, "FAIL") for lab, m, n, k, v, r, _ in DENSE]
    errored = gemm_row("m384", 384, 384, 384, "", "", check="FAIL")
    t = gemm_table(
        *(gemm_row(lab, m, n, k, v, v * r, check=c) for lab, m, n, k, v, r, c in failing), errored
    )
    with pytest.raises(CampaignError, match="no passing shape"):
        choose_representative(t, "compute_fwd")
    labels = choose_representative(t, "compute_fwd", from_failing=True)
    # by scale: m32 and m16k the ends; the 9 between in 3 bands, the noisiest of each:
    # m64 (10%) of m64-m256, m1024 (2%) of m384-m1024, m2048 (5%) of m2048-m8192
    assert labels == ["m64", "m1024", "m2048", "m16k", "m32"]  # table order
    # a passing row, when there is one, is the only candidate, as without the flag
    one = table([DENSE[3], *failing[:3]])
    assert choose_representative(one, "compute_fwd", from_failing=True) == ["m512"]


GROUPED = [
    ("g8_uniform_small", 8, 128, 128, 1.0, 0.01, "PASS"),
    ("g8_uniform_mid", 8, 1024, 1024, 50.0, 0.01, "PASS"),
    ("g8_uniform_big", 8, 4096, 4096, 400.0, 0.01, "PASS"),
    ("g8_top2_mid", 8, 1024, 1024, 40.0, 0.03, "PASS"),
    ("g8_skewed_mid", 8, 2048, 1024, 60.0, 0.02, "PASS"),
    ("g8_degenerate", 8, 512, 512, 10.0, 0.01, "FAIL"),
    ("g8_uniform_tiny", 8, 256, 256, 5.0, 0.04, "PASS"),
]


def test_grouped_includes_skewed_next_to_uniform():
    labels = choose_representative(table(GROUPED), "compute_fwd", grouped=True, k_max=3)
    assert len(labels) == 3
    assert any(is_skewed(x) for x in labels) and any(is_uniform(x) for x in labels)
    assert "g8_uniform_small" in labels and "g8_uniform_big" in labels
    assert "g8_top2_mid" in labels  # the noisiest skewed one
    # without the grouped flag the scale ends and noise decide
    plain = choose_representative(table(GROUPED), "compute_fwd", k_max=3)
    assert not any(is_skewed(x) for x in plain)


def test_grouped_without_passing_skewed_shape_raises():
    spec = [r for r in GROUPED if not is_skewed(r[0])] + [GROUPED[5]]
    with pytest.raises(CampaignError, match="skewed"):
        choose_representative(table(spec), "compute_fwd", grouped=True)


def test_label_tokens():
    assert is_skewed("moe-e8-top1") and is_skewed("dist=zipf,") is True
    assert not is_skewed("uniform_m4096") and is_uniform("g8.uniform")
    assert not is_uniform("nonuniform")  # whole tokens only
    # the grouped GEMM's own distributions: a parameter attached to the name, two-word names
    for label in ("dbrx_tp4_gate_up_zipf1.2", "olmoe_1b_7b_gate_up_onehot_heavy", "top2_cf1.0"):
        assert is_skewed(label) and not is_uniform(label), label
    assert is_uniform("qwen3_235b_gate_up_uniform") and not is_skewed("qwen3_235b_gate_up_uniform")


def test_every_distribution_of_the_grouped_shapes_is_named_uniform_or_skewed():
    """Each token distribution the bundled grouped GEMM draws is read as what it is, so the
    representative choice and the skew gate see every skewed shape of its campaigns."""
    from kernel_ratchet.kernels.grouped_gemm.shapes import moe_offlist, moe_shapes, moe_stress

    for s in [*moe_shapes(), *moe_offlist(), *moe_stress()]:
        assert is_uniform(s.label) != is_skewed(s.label), s.label
        assert is_uniform(s.label) == s.label.endswith("_uniform"), s.label


def test_bad_k_arguments():
    with pytest.raises(ValueError):
        choose_representative(table(DENSE), "compute_fwd", k_min=4, k_max=3)


def test_zero_work_shapes_are_not_chosen():
    spec = [*DENSE[:4], ("g_all_empty", 0, 64, 128, 0.0, 0.0, "PASS")]
    t = gemm_table(
        *(gemm_row(lab, m, n, k, v, v * r, check=c, fwd_ms=0.01) for lab, m, n, k, v, r, c in spec)
    )
    labels = choose_representative(t, "compute_fwd")
    assert "g_all_empty" not in labels and "m64" in labels
