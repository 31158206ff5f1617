"""The adapter protocol: Shape, load_adapter, load_shapes (kernel_ratchet.harness.adapter).

load_adapter / load_shapes import ``tests.harness.test_adapter:<name>``, the objects below.
"""

from __future__ import annotations

import pytest

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import (
    SNR_BF16,
    SNR_FP32,
    Adapter,
    Shape,
    load_adapter,
    load_shapes,
)

HERE = __name__


class Good(Adapter):
    min_snr_db = {"out": SNR_FP32, "da": 30.0}

    def make_case(self, shape, seed, device):
        return None

    def forward(self, case):
        return None

    def outputs(self, case):
        return {}

    def reference(self, case):
        return {}

    def flops(self, shape):
        return (0.0, 0.0)


class Abstract(Adapter):  # forgets forward, outputs, ...
    def make_case(self, shape, seed, device):
        return None


class NotAnAdapter:
    instantiated = False

    def __init__(self) -> None:
        NotAnAdapter.instantiated = True


class NeedsArgs:
    def __init__(self, x):  # a non-adapter class must be rejected, not called
        self.x = x


INSTANCE = Good()
SHAPES = [Shape("a", M=1, N=2, K=3), Shape("b", M=4, N=5)]
DICT_SHAPES = [{"label": "d", "M": 8, "N": 8, "K": 8, "B": 2, "params": {"dist": "skewed"}}]
DUP_SHAPES = [Shape("x", M=1, N=1), Shape("y", M=2, N=2), Shape("x", M=3, N=3)]
EMPTY_SHAPES: list[Shape] = []


def shape_fn() -> list[Shape]:
    return [Shape("f1", M=16, N=16, K=16), Shape("f2", M=32, N=16, K=8)]


def empty_fn() -> list[Shape]:
    return []


# ---- Shape ------------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["a,b", "", "x\ny"], ids=["comma", "empty", "newline"])
def test_shape_rejects_bad_labels(label):
    with pytest.raises(ValueError, match="label"):
        Shape(label, M=1, N=1)


@pytest.mark.parametrize("dim", ["M", "N", "K", "B"])
def test_shape_rejects_negative_dims(dim):
    kwargs = {"M": 1, "N": 1, "K": 1, "B": 1, dim: -1}
    with pytest.raises(ValueError, match=f"{dim} must be a non-negative int"):
        Shape("s", **kwargs)


def test_shape_rejects_float_dims():
    with pytest.raises(ValueError, match="M must be"):
        Shape("s", M=1.5, N=1)


def test_shape_defaults_and_zero_dims_are_fine():
    s = Shape("mem", M=0, N=7)
    assert (s.K, s.B, s.params) == (0, 1, {})


def test_shape_to_dict_from_dict_round_trip_with_params():
    s = Shape("g", M=128, N=64, K=32, B=8, params={"dist": "skewed", "alpha": 1.5})
    d = s.to_dict()
    assert d == {
        "label": "g",
        "B": 8,
        "M": 128,
        "N": 64,
        "K": 32,
        "params": {"dist": "skewed", "alpha": 1.5},
    }
    back = Shape.from_dict(d)
    assert back == s and back.params == {"dist": "skewed", "alpha": 1.5}
    assert hash(back) == hash(s)
    assert "params" not in Shape("p", M=1, N=1).to_dict()


def test_shape_params_are_copied_not_shared():
    p = {"dist": "uniform"}
    s = Shape("c", M=1, N=1, params=p)
    p["dist"] = "skewed"
    assert s.params == {"dist": "uniform"}


def test_shape_from_dict_defaults_k_and_b():
    s = Shape.from_dict({"label": "m", "M": "3", "N": 4})
    assert (s.M, s.N, s.K, s.B) == (3, 4, 0, 1)


def test_threshold_per_name_and_default():
    ad = Good()
    assert ad.threshold("out") == SNR_FP32
    assert ad.threshold("da") == 30.0
    assert ad.threshold("db") == SNR_BF16  # no "default" key: the bf16 threshold


# ---- load_adapter -----------------------------------------------------------------------


def test_load_adapter_instantiates_the_class():
    ad = load_adapter(f"{HERE}:Good")
    assert type(ad) is Good
    assert load_adapter(f"{HERE}:INSTANCE") is INSTANCE


def test_load_adapter_loads_the_tiny_gemm_example(monkeypatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm"
    monkeypatch.syspath_prepend(str(root))
    ad = load_adapter("tiny_gemm.adapter:TinyGemm")
    assert ad.schema == "gemm" and not ad.has_backward


def test_load_adapter_without_colon():
    with pytest.raises(ProfileError, match="'package.module:ClassName'.*ratchet.yaml"):
        load_adapter("tiny_gemm.adapter.TinyGemm")


def test_load_adapter_missing_module():
    with pytest.raises(ProfileError, match="cannot be imported.*installed editable") as exc:
        load_adapter("no_such_pkg_kr.adapter:X")
    assert "no_such_pkg_kr" in str(exc.value)


def test_load_adapter_missing_attribute_names_it_and_the_fix():
    with pytest.raises(ProfileError, match="has no attribute 'Nope'.*ratchet.yaml"):
        load_adapter(f"{HERE}:Nope")


@pytest.mark.parametrize("attr", ["NotAnAdapter", "NeedsArgs", "SHAPES"])
def test_load_adapter_rejects_non_adapters_without_calling_them(attr):
    NotAnAdapter.instantiated = False
    with pytest.raises(ProfileError, match="not a kernel_ratchet.harness.adapter.Adapter"):
        load_adapter(f"{HERE}:{attr}")
    assert not NotAnAdapter.instantiated


def test_load_adapter_abstract_subclass_says_what_to_implement():
    with pytest.raises(ProfileError, match="abstract method"):
        load_adapter(f"{HERE}:Abstract")


# ---- load_shapes ------------------------------------------------------------------------


def test_load_shapes_list_and_dicts():
    assert load_shapes(f"{HERE}:SHAPES") == SHAPES
    (d,) = load_shapes(f"{HERE}:DICT_SHAPES")
    assert (d.label, d.B, d.M, d.params) == ("d", 2, 8, {"dist": "skewed"})


def test_load_shapes_accepts_a_zero_arg_callable():
    assert [s.label for s in load_shapes(f"{HERE}:shape_fn")] == ["f1", "f2"]


def test_load_shapes_rejects_duplicate_labels():
    with pytest.raises(ProfileError, match=r"duplicate labels: \['x'\]"):
        load_shapes(f"{HERE}:DUP_SHAPES")


@pytest.mark.parametrize("attr", ["EMPTY_SHAPES", "empty_fn"])
def test_load_shapes_rejects_empty(attr):
    with pytest.raises(ProfileError, match="is empty"):
        load_shapes(f"{HERE}:{attr}")


@pytest.mark.parametrize(
    "spec",
    ["no_colon.shapes", "no_such_pkg_kr:SHAPES", f"{HERE}:MISSING"],
    ids=["no-colon", "no-module", "no-attr"],
)
def test_load_shapes_bad_spec(spec):
    with pytest.raises(ProfileError, match="shape"):
        load_shapes(spec)
