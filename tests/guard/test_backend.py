"""The backend audit: vendor-library calls and reference imports a TRITON candidate adds."""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.backend import backend_audit

_BEFORE = """
import torch
import triton


@triton.jit
def _k(a_ptr):
    pass


def op(a, b):
    return torch.empty_like(a)
"""


def test_another_backend_is_not_audited() -> None:
    after = _BEFORE.replace("torch.empty_like(a)", "torch.mm(a, b)")
    assert not backend_audit({"k.py": _BEFORE}, {"k.py": after}, "CUDA").flagged


def test_an_alias_of_torch_nn_functional_is_followed() -> None:
    after = "import torch.nn.functional as F\n" + _BEFORE.replace(
        "torch.empty_like(a)", "F.linear(a, b)"
    )
    r = backend_audit({"k.py": _BEFORE}, {"k.py": after}, "triton")
    assert r.flagged and "F.linear" in r.calls[0], r


def test_the_matmul_operator_and_tensor_methods_are_vendor_calls() -> None:
    for expr in ("a @ b.T", "a.matmul(b.T)"):
        after = _BEFORE.replace("torch.empty_like(a)", expr)
        assert backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON").flagged, expr


def test_a_call_the_incumbent_already_makes_is_not_added() -> None:
    both = _BEFORE.replace("torch.empty_like(a)", "torch.mm(a, b)")
    assert not backend_audit({"k.py": both}, {"k.py": both}, "TRITON").flagged


def test_device_code_of_a_triton_kernel_is_not_a_vendor_call() -> None:
    after = _BEFORE.replace("    pass\n", "    x = a_ptr @ a_ptr\n", 1)
    assert not backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON").flagged


def test_a_file_that_does_not_parse_is_left_to_the_static_audit() -> None:
    assert not backend_audit({"k.py": _BEFORE}, {"k.py": "def ("}, "TRITON").flagged


@pytest.mark.parametrize(
    "expr",
    [
        "getattr(torch, 'mm')(a, b)",  # named by a string
        "torch.func.vmap(torch.dot)(a, b)",  # passed, not called
        "torch.mv(a, b[0])",
        "a.mv(b[0])",
        "torch.linalg.multi_dot([a, b.T])",
        "torch.nn.Linear(4, 4)(a)",
    ],
)
def test_a_vendor_operation_named_any_way_is_flagged(expr: str) -> None:
    after = _BEFORE.replace("torch.empty_like(a)", expr)
    assert backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON").flagged, expr


def test_a_compiled_function_is_flagged_even_without_parentheses() -> None:
    after = _BEFORE.replace("def op(a, b):", "@torch.compile\ndef op(a, b):")
    r = backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON")
    assert r.flagged and "torch.compile" in r.calls[0], r


@pytest.mark.parametrize(
    "expr",
    ["torch.empty((3, 3))", "a.to(torch.float32).contiguous()", "torch.cuda.current_device()"],
)
def test_allocation_casts_and_device_queries_are_not_vendor_calls(expr: str) -> None:
    after = _BEFORE.replace("torch.empty_like(a)", expr)
    assert not backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON").flagged, expr


@pytest.mark.parametrize(
    "how",
    [
        "m = importlib.import_module('mypkg.reference')",
        "m = __import__('mypkg.reference')",
        "m = sys.modules['mypkg.reference']",
        "from mypkg import reference as m",
        "m = importlib.import_module('cupy')",
    ],
)
def test_a_reference_or_vendor_module_imported_any_way_is_flagged(how: str) -> None:
    after = _BEFORE.replace("    return torch.empty_like(a)", f"    {how}\n    return m.mm(a, b)")
    r = backend_audit(
        {"k.py": _BEFORE}, {"k.py": after}, "TRITON", reference_modules=["mypkg.reference"]
    )
    assert r.flagged and "import of the" in " ".join(r.calls), r


def test_a_module_of_the_project_imported_by_name_is_not_a_reference() -> None:
    after = _BEFORE.replace(
        "    return torch.empty_like(a)",
        "    m = importlib.import_module('mypkg.tiles')\n    return a",
    )
    r = backend_audit(
        {"k.py": _BEFORE}, {"k.py": after}, "TRITON", reference_modules=["mypkg.reference"]
    )
    assert not r.flagged, r


@pytest.mark.parametrize(
    ("imports", "expr"),
    [
        ("from torch.nn.functional import linear as _lin", "_lin(a, b)"),
        ("from torch import mm", "mm(a, b.T)"),
        ("from torch.nn import functional", "functional.linear(a, b)"),
        ("import torch as T", "T.matmul(a, b.T)"),
        ("from torch.linalg import matmul as mmul", "mmul(a, b.T)"),
        ("import operator", "operator.matmul(a, b.T)"),
        ("from operator import matmul", "matmul(a, b.T)"),
        ("", "a.softmax(dim=-1)"),
        ("", "a.contiguous().softmax(dim=-1)"),
        ("", "a[0].mm(b.T)"),
        ("", "torch.softmax(a, dim=-1)"),
        ("", "torch.layer_norm(a, a.shape[-1:])"),
    ],
)
def test_a_vendor_operation_under_an_imported_name_or_spelling_is_flagged(
    imports: str, expr: str
) -> None:
    after = imports + "\n" + _BEFORE.replace("torch.empty_like(a)", expr)
    r = backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON")
    assert r.flagged, (imports, expr)


def test_an_imported_name_of_a_non_vendor_torch_function_is_not_a_vendor_call() -> None:
    after = "from torch import empty_like as el\n" + _BEFORE.replace("torch.empty_like", "el")
    assert not backend_audit({"k.py": _BEFORE}, {"k.py": after}, "TRITON").flagged
