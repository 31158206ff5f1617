"""One rule tells a Triton or Gluon JIT function by its decorators, for every static scan."""

from __future__ import annotations

import ast

from kernel_ratchet.guard.backend import backend_audit
from kernel_ratchet.guard.jit_paths import jit_functions
from kernel_ratchet.guard.kernel_facts import kernel_facts
from kernel_ratchet.guard.syntax import is_jit, jit_aliases
from kernel_ratchet.knobs.discover import plain_kernels

SOURCE = """
import functools
import numba
import torch
import triton
import triton.language as tl
from triton import jit as tjit
from triton.experimental import gluon

@triton.jit
def k_plain(x_ptr, N: tl.constexpr):
    torch.mm(x_ptr, x_ptr)

@triton.autotune(configs=[triton.Config({"B": 16})], key=["N"])
@triton.jit
def k_tuned(x_ptr, N, B: tl.constexpr):
    torch.mm(x_ptr, x_ptr)

@triton.jit(do_not_specialize=["n"])
def k_call(x_ptr, n):
    torch.mm(x_ptr, x_ptr)

@gluon.jit
def k_gluon(x_ptr):
    torch.mm(x_ptr, x_ptr)

@tjit
def k_alias(x_ptr):
    torch.mm(x_ptr, x_ptr)

@libentry()
@triton.heuristics({"B": lambda a: 16})
@triton.jit
def k_wrapped(x_ptr, B: tl.constexpr):
    torch.mm(x_ptr, x_ptr)

@torch.jit.script
def host_torchscript(x):
    return torch.matmul(x, x)

@numba.jit
def host_numba(x):
    return torch.bmm(x, x)

@numba.njit
def host_njit(x):
    return torch.addmm(x, x, x)

@functools.cache
def host_cached(x):
    return torch.einsum("ij,jk->ik", x, x)

@triton.autotune(configs=[], key=[])
def host_autotune_alone(x):
    return torch.baddbmm(x, x, x)
"""

KERNELS = {"k_plain", "k_tuned", "k_call", "k_gluon", "k_alias", "k_wrapped"}


def test_the_rule_on_each_decorator_form() -> None:
    tree = ast.parse(SOURCE)
    aliases = jit_aliases(tree)
    assert aliases == {"tjit"}
    found = {fn.name for fn in tree.body if isinstance(fn, ast.FunctionDef) and is_jit(fn, aliases)}
    assert found == KERNELS
    # without the module's import, an alias is just a name
    assert not is_jit(next(f for f in tree.body if getattr(f, "name", "") == "k_alias"))


def test_every_scan_sees_the_same_kernels() -> None:
    tree = ast.parse(SOURCE)
    assert {fn.name for fn in jit_functions(tree)} == KERNELS
    assert kernel_facts(tree, lambda _: None).jit_kernels == KERNELS
    assert plain_kernels([SOURCE]) == KERNELS - {"k_tuned"}
    # the backend audit reads device code as device code: torch.mm inside the kernels is no
    # vendor call, each host function's call is
    audit = backend_audit({}, {"k.py": SOURCE}, "TRITON")
    lines = {int(c.split(" — ")[0].split(":")[1]) for c in audit.calls}
    host = [i for i, text in enumerate(SOURCE.splitlines(), 1) if text.startswith("    return")]
    assert audit.flagged and lines == set(host)
