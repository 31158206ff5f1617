"""Backend audit of one round's change: a TRITON campaign's candidate must not hand the work to
the vendor library or to the project's reference.

A Triton kernel replaced by ``torch.nn.functional.linear`` (cuBLAS), by a ``torch.matmul``
in an ``except`` handler, by ``torch.mm`` behind a branch the campaign's shapes always take, or
by a call of the reference implementation can be correct and faster, but it is a change of
backend, not a kernel gain. :func:`backend_audit` lists the vendor-library calls and reference
imports the candidate's kernel files *add* (calls the incumbent already makes, e.g. in a
backward written with torch ops, are not counted) and flags the change; accepting it needs the
user's explicit consent (a new campaign on that backend, or an allowance in the profile).

What is a vendor call: ``torch.matmul/mm/bmm/addmm/addmv/baddbmm/einsum/tensordot/
inner/outer``, ``torch.nn.functional`` compute ops (and their ``torch.softmax``-style
spellings), ``torch._scaled_mm``/``_grouped_mm``, ``torch.ops.aten.*``, ``torch.compile``,
the tensor methods ``.matmul/.mm/.bmm/.softmax`` and kin, the ``@`` operator and
``operator.matmul``, each also under a name an import bound it to (``from torch import mm as
_mm``, ``import torch as T``), and imports of ``cupy``, ``cublas`` or ``cudnn`` bindings. A
reference call: an import from a module whose last name contains ``reference`` (or one of
``reference_modules``), or a name ending in ``_ref``.

Limits: the audit reads the syntax tree. A vendor call reached through another module,
``getattr`` with a computed name or ``exec`` is not seen here; the run-time complement
(:mod:`kernel_ratchet.harness.op_census`, the ATen operations of the checked call) sees it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernel_ratchet.guard.syntax import dotted, is_jit, jit_aliases

#: Campaign backends whose kernels must not call the vendor library.
KERNEL_BACKENDS = frozenset({"TRITON"})
_TORCH_OPS = frozenset(
    [
        "matmul",
        "mm",
        "bmm",
        "addmm",
        "addmv",
        "addbmm",
        "baddbmm",
        "einsum",
        "tensordot",
        "inner",
        "outer",
        "chain_matmul",
        "mv",
        "dot",
        "vdot",
        "ger",
        "addr",
        "kron",
        "matrix_power",
        "_scaled_mm",
        "_grouped_mm",
        "_scaled_grouped_mm",
        "compile",
        "conv_tbc",
        "_trilinear",
        "cdist",
        "pdist",
    ]
)
_F_OPS = frozenset(
    [
        "linear",
        "bilinear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "scaled_dot_product_attention",
        "layer_norm",
        "rms_norm",
        "group_norm",
        "batch_norm",
        "softmax",
        "log_softmax",
        "gelu",
        "silu",
        "relu",
        "embedding",
        "scaled_mm",
        "scaled_grouped_mm",
        "grouped_mm",
    ]
)
#: ``torch.<op>`` spellings of the functional ops above (``torch.softmax``, ``torch.conv2d``).
_TORCH_OPS = _TORCH_OPS | _F_OPS
_METHODS = frozenset(
    {"matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "__matmul__", "mv", "addmv", "dot"}
    | {"vdot", "softmax", "log_softmax", "inner", "outer", "kron", "tensordot"}
)
#: Modules whose names an import may bind locally (``from torch import mm as _mm``).
_TORCH_MODULES = ("torch", "torch.nn.functional", "torch.linalg", "torch.nn", "torch.ops.aten")
_LINALG_OPS = frozenset({"matmul", "multi_dot", "vecdot", "matrix_power", "tensordot"})
#: torch.nn layers that run a vendor GEMM, convolution or attention when called.
_NN_LAYERS = frozenset(
    {"Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "MultiheadAttention"}
)
_VENDOR_MODULES = ("cupy", "cublas", "cudnn", "cutlass", "nvmath")
_JIT = "jit"  # context of a node inside a @triton.jit kernel: device code, never a vendor call


@dataclass(frozen=True)
class BackendAudit:
    """The finding: ``flagged`` when the change adds vendor or reference calls; ``calls`` read
    ``file:line — what (where)``; ``reason`` is one sentence for the round record."""

    backend: str
    flagged: bool
    calls: tuple[str, ...]
    reason: str


def _vendor_call(node: ast.AST, names: Mapping[str, str]) -> str | None:
    """A vendor operation that ``node`` calls or names (``fn = torch.mm``, ``@torch.compile``,
    ``getattr(torch, "mm")``, a name an import bound to one: ``from torch import mm``), or
    None. ``names`` maps local names to what an import bound them to."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return "the @ operator (torch.matmul)"
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
        return _vendor_name(names[node.id]) or _operator(names[node.id])
    if isinstance(node, ast.Attribute):  # named as written, judged as imported
        return _vendor_name(_resolved(dotted(node), names)) and dotted(node)
    if not isinstance(node, ast.Call):
        return None
    name = _resolved(dotted(node.func), names)
    leaf = name.rpartition(".")[2]
    if name == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
        return _vendor_name(_resolved(f"{dotted(node.args[0])}.{node.args[1].value}", names))
    if not (isinstance(node.func, ast.Attribute) and leaf in _METHODS):
        return None
    # a method of anything but the torch module: a tensor, also one a call returned
    receiver = _resolved(dotted(node.func.value), names)
    if receiver != "torch" and _vendor_name(name) is None:
        return f".{leaf}() on a tensor"
    return None


def _vendor_name(name: str) -> str | None:
    """``name`` when the dotted name is a vendor operation of torch, else None."""
    head, _, leaf = name.rpartition(".")
    if head == "torch" and leaf in _TORCH_OPS:
        return name
    if head == "torch.nn.functional" and leaf in _F_OPS:
        return name
    if head == "torch.linalg" and leaf in _LINALG_OPS:
        return name
    if head in ("torch.nn", "nn") and leaf in _NN_LAYERS:
        return name
    if name.startswith(("torch.ops.aten.", "torch._C._nn.")) and name.count(".") >= 3:
        return name
    return None


def _resolved(name: str, names: Mapping[str, str]) -> str:
    """``name`` with its first part replaced by what an import bound it to (``T.mm`` after
    ``import torch as T``: ``torch.mm``)."""
    head, dot, rest = name.partition(".")
    return f"{names[head]}{dot}{rest}" if head in names else name


def _operator(name: str) -> str | None:
    return name if name in ("operator.matmul", "operator.__matmul__") else None


def _bound_names(tree: ast.Module) -> dict[str, str]:
    """Local names that imports bind to torch's modules or operations, and ``operator``'s
    matmul: ``import torch as T`` (T: torch), ``from torch.nn.functional import linear as
    lin`` (lin: torch.nn.functional.linear)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and (a.name in _TORCH_MODULES or a.name == "operator"):
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module in (*_TORCH_MODULES, "operator"):
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dynamic_import(node: ast.AST) -> str | None:
    """The module a node imports by name at run time: ``importlib.import_module("m")``,
    ``__import__("m")``, ``sys.modules["m"]``."""
    named = isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
    if named and dotted(node.func) in ("importlib.import_module", "import_module", "__import__"):
        return str(node.args[0].value)  # type: ignore[union-attr]
    if isinstance(node, ast.Subscript) and dotted(node.value) == "sys.modules":
        key = node.slice
        return str(key.value) if isinstance(key, ast.Constant) else None
    return None


def _reference_import(node: ast.AST, reference_modules: Sequence[str]) -> str | None:
    dynamic = _dynamic_import(node)
    if dynamic is not None:
        mod, names, modules = "", [], [dynamic]
    elif isinstance(node, ast.ImportFrom):
        mod = node.module or ""
        names = [a.name for a in node.names]
        modules = [mod, *(f"{mod}.{n}" for n in names)]  # from pkg import reference
    elif isinstance(node, ast.Import):
        mod, names = "", [a.name for a in node.names]
        modules = names
    else:
        return None
    for m in modules:
        last = m.rsplit(".", 1)[-1]
        if m and ("reference" in last or m in reference_modules):
            return f"import of the reference module {m}"
        if last.startswith(_VENDOR_MODULES):
            return f"import of the vendor library {m}"
    refs = [n for n in names if n.endswith("_ref")]
    return f"import of the reference {refs[0]} from {mod}" if refs else None


def _context(tree: ast.Module) -> dict[int, str]:
    """Where each node sits: inside an ``except`` handler or behind an ``if``."""
    where: dict[int, str] = {}
    aliases = jit_aliases(tree)

    def visit(node: ast.AST, ctx: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = ctx
            if isinstance(child, ast.FunctionDef) and is_jit(child, aliases):
                here = _JIT
            elif ctx == _JIT:
                pass
            elif isinstance(child, ast.ExceptHandler):
                here = "in an except handler: a fallback"
            elif isinstance(child, ast.If) and not ctx:
                here = "behind a branch: the path the shapes take decides the backend"
            where[id(child)] = here
            visit(child, here)

    visit(tree, "")
    return where


def _findings(path: str, source: str, reference_modules: Sequence[str]) -> dict[str, str]:
    """``what (where)`` -> ``file:line`` for every vendor call or reference import."""
    tree = ast.parse(source, filename=path)
    where, names = _context(tree), _bound_names(tree)
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        what = _vendor_call(node, names) or _reference_import(node, reference_modules)
        ctx = where.get(id(node), "")
        if what and ctx != _JIT:
            key = f"{what}{f' ({ctx})' if ctx else ''}"
            out.setdefault(key, f"{path}:{getattr(node, 'lineno', 0)}")
    return out


def backend_audit(
    before: Mapping[str, str],
    after: Mapping[str, str],
    backend: str,
    *,
    reference_modules: Sequence[str] = (),
) -> BackendAudit:
    """Vendor-library calls and reference imports that the candidate's kernel files ``after``
    add to the incumbent's ``before`` (both: path -> source text), for a campaign on
    ``backend``. Only backends in :data:`KERNEL_BACKENDS` are audited (another backend is never
    flagged). A file that does not parse is skipped here (the static audit refuses it)."""
    name = backend.upper()
    if name not in KERNEL_BACKENDS:
        return BackendAudit(name, False, (), f"backend {name}: no backend rule")
    added: list[str] = []
    for path, text in sorted(after.items()):
        if not path.endswith(".py"):
            continue
        try:
            now = _findings(path, text, reference_modules)
            old = _findings(path, before[path], reference_modules) if path in before else {}
        except SyntaxError:
            continue
        added += [f"{loc} — {what}" for what, loc in now.items() if what not in old]
    if not added:
        return BackendAudit(name, False, (), f"no vendor-library or reference call added ({name})")
    reason = (
        f"backend change: the candidate of a {name} campaign hands work to the vendor library "
        f"or the reference ({'; '.join(added)}); that is not a {name} kernel gain and needs "
        f"the user's explicit consent (a new campaign on that backend, or an allowance in "
        "the profile)"
    )
    return BackendAudit(name, True, tuple(added), reason)
