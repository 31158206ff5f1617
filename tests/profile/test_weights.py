"""Per-shape weights of the time-weighted effect (``ops.<op>.weights`` in ratchet.yaml)."""

from __future__ import annotations

import pytest

from kernel_ratchet.campaign.create import _check_weights
from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.loader import load_profile


def test_weights_default_to_none_and_load_as_floats(tiny_project):
    p = tiny_project()
    assert load_profile(p.write()).op("gemm_bf16").weights == {}
    p.op["weights"] = {"m128": 4, "m4096": 0.5}
    assert load_profile(p.write()).op("gemm_bf16").weights == {"m128": 4.0, "m4096": 0.5}


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ([1, 2], "expected a mapping"),
        ({"m128": 0}, "not a positive finite number"),
        ({"m128": -2.0}, "not a positive finite number"),
        ({"m128": "heavy"}, "not a positive finite number"),
        ({"m128": True}, "not a positive finite number"),
        ({"m128": float("inf")}, "not a positive finite number"),
        ({7: 1.0}, "is not a non-empty string"),
    ],
)
def test_bad_weights_name_the_key_and_the_fix(tiny_project, weights, problem):
    p = tiny_project()
    p.op["weights"] = weights
    with pytest.raises(ProfileError) as err:
        load_profile(p.write())
    text = str(err.value)
    assert "ops.gemm_bf16.weights" in text and problem in text and "Fix:" in text


def test_a_weight_for_a_shape_that_is_not_a_target_is_refused(tiny_project):
    p = tiny_project()
    p.op["weights"] = {"m4096": 2.0}
    op = load_profile(p.write()).op("gemm_bf16")
    _check_weights(op, ["m128", "m4096"])  # a target shape is fine ...
    with pytest.raises(ProfileError, match="m4096.*Fix: use labels from .*m128"):
        _check_weights(op, ["m128", "m2048"])  # ... a label no target shape has is not
    # a campaign given its own shape set (ratchet init --shapes) weighs the shapes both share
    _check_weights(op, ["m128", "m2048"], "my_shapes:other")
    with pytest.raises(ProfileError, match="m4096"):
        _check_weights(op, ["m128", "m2048"], op.shapes)
