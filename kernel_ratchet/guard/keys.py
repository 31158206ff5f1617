"""Cache-key components: what a key expression is built from, and whether it survives a step.

:class:`KeyReader` reads one key expression (``(id(a), a._version, a.shape)``, ``args``,
``x.data_ptr()``, a bare tensor ...) inside one function and returns its
:class:`KeyComponent` list. Local names are followed through their assignments in that function
(``key = (id(a), M)`` then ``cache[key]``); parameters get a role from :mod:`.roles`.

Kinds of component and their stability across training steps (SPEC section 8):

=========  ============================================  ==========================================
kind       built from                                    across steps
=========  ============================================  ==========================================
identity   ``id(t)``, ``hash(t)``, ``t`` itself, ``is``  weight: stable; others: fresh every step
address    ``t.data_ptr()``, ``t.untyped_storage()...``  weight: stable; others: fresh, and a freed
                                                         address is reused (stale hits)
version    ``t._version``                                moves at every in-place update
meta       ``t.shape``, ``.dtype``, ``.size()`` ...      stable, but does not tell data apart
geometry   ``t.data_ptr() % 16``, ``is_aligned(t)``      stable: alignment, or a helper of this
           (a helper returning only geometry of t)       file that reads nothing but geometry
args       ``*args`` / ``**kwargs`` of a wrapper         every argument, tensors included
content    ``t.tobytes()``, ``.numpy()``, ``.item()``,    the values of a non-weight tensor: new
           ``.tolist()``, ``t[i, j]``                    every step (a content-keyed cache)
value      constants, ints, strings, config names        stable
=========  ============================================  ==========================================
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kernel_ratchet.guard.roles import FRESH_ROLES

_META_ATTRS = {
    "shape",
    "dtype",
    "device",
    "layout",
    "ndim",
    "is_cuda",
    "requires_grad",
    "is_leaf",
    "itemsize",
    "nbytes",
}
_META_METHODS = {
    "size",
    "stride",
    "numel",
    "dim",
    "is_contiguous",
    "element_size",
    "storage_offset",
    "nelement",
    "get_device",
}
_PASS_CALLS = {"tuple", "str", "repr", "int", "float", "bool", "list", "frozenset", "sorted"}
#: ``t.data_ptr() % k`` / ``& (k - 1)`` with ``k`` at most this is an alignment, not an address.
MAX_ALIGNMENT = 1024
#: Methods whose result is the tensor's values (or a copy of them on the host).
_CONTENT_METHODS = {"tobytes", "numpy", "item", "tolist", "cpu", "detach", "__bytes__"}


@dataclass(frozen=True)
class KeyComponent:
    """One part of a cache key. ``tensor``/``role`` name the tensor it depends on, if any."""

    text: str
    kind: str  # identity | address | version | meta | geometry | args | content | value
    tensor: str | None = None
    role: str | None = None

    @property
    def fresh(self) -> bool:
        """True when the tensor behind an identity/address/version part is new every step."""
        return self.role in FRESH_ROLES

    @property
    def stable(self) -> bool:
        """Whether this part keeps its value across training steps (SPEC section 8)."""
        if self.kind in ("meta", "geometry", "value"):
            return True
        if self.kind in ("identity", "address"):
            return not self.fresh
        return False  # version moves every update; args include fresh tensors

    def describe(self) -> str:
        """``id(a) [identity of activation: fresh every step]``-style text."""
        if self.kind in ("meta", "value"):
            return f"{self.text} [{self.kind}: stable]"
        if self.kind == "geometry":
            return f"{self.text} [geometry of {self.role} {self.tensor}: stable]"
        if self.kind == "args":
            return f"{self.text} [all call arguments: fresh tensors every step]"
        if self.kind == "version":
            return f"{self.text} [_version of {self.role}: moves at every in-place update]"
        if self.kind == "content":
            return f"{self.text} [content of {self.role} {self.tensor}: new values every step]"
        life = "fresh every step" if self.fresh else "same object every step"
        return f"{self.text} [{self.kind} of {self.role} {self.tensor}: {life}]"


def _alignment(node: ast.BinOp) -> bool:
    """``t.data_ptr() % k`` or ``t.data_ptr() & (k - 1)`` with a constant ``k`` of at most
    :data:`MAX_ALIGNMENT`: where the tensor sits relative to an alignment, not which it is."""
    left, right = node.left, node.right
    ptr = (
        isinstance(left, ast.Call)
        and isinstance(left.func, ast.Attribute)
        and left.func.attr == "data_ptr"
    ) or _address_root(left) is not None
    if not ptr or not isinstance(right, ast.Constant) or type(right.value) is not int:
        return False
    if isinstance(node.op, ast.Mod):
        return 0 < right.value <= MAX_ALIGNMENT
    return isinstance(node.op, ast.BitAnd) and 0 <= right.value < MAX_ALIGNMENT


#: Attributes that hold where a tensor (or its storage) lives: an address, like data_ptr().
_ADDRESS_ATTRS = {"_cdata", "__cuda_array_interface__", "__array_interface__"}


def _address_root(node: ast.expr) -> ast.expr | None:
    """The tensor whose address ``node`` reads through an attribute of
    :data:`_ADDRESS_ATTRS` (subscripts of it included), or None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if not isinstance(node, ast.Attribute) or node.attr not in _ADDRESS_ATTRS:
        return None
    base = node.value
    if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute):
        base = base.func.value  # t.untyped_storage()._cdata
    return base


def _leaf_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value
    return None


class KeyReader:
    """Reads key expressions of one function.

    ``assigned`` maps a local name to the expression last assigned to it; ``params`` are the
    function's parameters (``varargs`` the ``*args``/``**kwargs`` ones); ``tensor_params`` those
    annotated as tensors, ``plain_params`` those annotated with another type (never a tensor);
    ``role`` gives the role of a plain name (see :func:`.roles.role_of`); ``geometry_fns`` the
    functions of the file whose result is geometry of their arguments (:mod:`.cache_values`).
    """

    def __init__(
        self,
        assigned: Mapping[str, ast.expr],
        params: set[str],
        varargs: set[str],
        tensor_params: set[str],
        role: Callable[[str], str],
        plain_params: frozenset[str] = frozenset(),
        geometry_fns: frozenset[str] = frozenset(),
    ) -> None:
        self.assigned, self.params, self.varargs = assigned, params, varargs
        self.tensor_params, self._role, self.plain_params = tensor_params, role, plain_params
        self.geometry_fns = geometry_fns
        self._busy: set[str] = set()

    def role(self, node: ast.expr) -> tuple[str | None, str | None]:
        """(tensor name, role) of the tensor an expression denotes, or (None, None)."""
        name = _leaf_name(node)
        if isinstance(node, ast.Name) and name in self.assigned and name not in self._busy:
            self._busy.add(name)
            try:
                inner = [c for c in self.read(self.assigned[name]) if c.kind == "identity"]
            finally:
                self._busy.discard(name)
            return (name, inner[0].role) if inner else (None, None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return self.role(node.func.value)  # a.contiguous(), w.t(): derived tensor
        if name is None or (isinstance(node, ast.Name) and name in self.plain_params):
            return None, None
        role = self._role(name)
        if role != "unknown" or (isinstance(node, ast.Name) and name in self.tensor_params):
            return name, role
        return None, None

    def read(self, node: ast.expr) -> list[KeyComponent]:
        """Components of one key expression (never empty: an opaque part is a ``value``)."""
        out = self._read(node)
        return out or [KeyComponent(ast.unparse(node), "value")]

    def _tensor(self, node: ast.expr, kind: str, text: str) -> list[KeyComponent]:
        tensor, role = self.role(node)
        if tensor is None:
            inner = [c for c in self._read(node) if c.kind in ("identity", "args")]
            if inner:
                return [
                    KeyComponent(text, kind if c.kind == "identity" else "args", c.tensor, c.role)
                    for c in inner
                ]
            return [KeyComponent(text, kind, ast.unparse(node), "unknown")]
        return [KeyComponent(text, kind, tensor, role)]

    def _read(self, node: ast.expr) -> list[KeyComponent]:
        text = ast.unparse(node)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [c for e in node.elts for c in self.read(e)]
        if isinstance(node, ast.Starred):
            return self.read(node.value)
        if isinstance(node, ast.Constant):
            return [KeyComponent(text, "value")]
        if isinstance(node, ast.JoinedStr):
            return [
                c
                for v in node.values
                if isinstance(v, ast.FormattedValue)
                for c in self.read(v.value)
            ]
        if isinstance(node, ast.BinOp):
            if _alignment(node):
                return self._as_geometry(self.read(node.left), text)
            return self.read(node.left) + self.read(node.right)
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.IfExp)):
            return self._operands(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        root = _address_root(node)
        if root is not None:  # t._cdata, t.__cuda_array_interface__["data"][0]
            return self._tensor(root, "address", text)
        if isinstance(node, ast.Attribute):
            if node.attr in _META_ATTRS:
                return [KeyComponent(text, "meta", *self.role(node.value))]
            if node.attr == "_version":
                return [KeyComponent(text, "version", *self.role(node.value))]
        if isinstance(node, ast.Subscript) and _leaf_name(node) is None:
            inner = self._read(node.value)
            if inner and all(c.kind in ("meta", "value", "args") for c in inner):
                return [KeyComponent(text, c.kind, c.tensor, c.role) for c in inner]
            if inner and all(c.kind in ("identity", "content") for c in inner):
                return [KeyComponent(text, "content", c.tensor, c.role) for c in inner]
        return self._name(node)

    def _name(self, node: ast.expr) -> list[KeyComponent]:
        if isinstance(node, ast.Name):
            if node.id in self.varargs:
                return [KeyComponent(node.id, "args", node.id, "unknown")]
            if node.id in self.assigned and node.id not in self._busy:
                self._busy.add(node.id)
                try:
                    return self.read(self.assigned[node.id])
                finally:
                    self._busy.discard(node.id)
        tensor, role = self.role(node)
        if tensor is not None:
            return [KeyComponent(ast.unparse(node), "identity", tensor, role)]
        return [KeyComponent(ast.unparse(node), "value")]

    def _operands(self, node: ast.expr) -> list[KeyComponent]:
        """Parts of a comparison, ``and``/``or``/``not`` or ``x if c else y``: those of every
        operand (``t is None`` tests presence: a value)."""
        if isinstance(node, ast.Compare):
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) and all(
                isinstance(c, ast.Constant) and c.value is None for c in node.comparators
            ):
                return [KeyComponent(ast.unparse(node), "value")]
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.BoolOp):
            operands = node.values
        elif isinstance(node, ast.UnaryOp):
            operands = [node.operand]
        elif isinstance(node, ast.IfExp):
            operands = [node.test, node.body, node.orelse]
        else:
            return []
        return [c for o in operands for c in self.read(o)]

    @staticmethod
    def _as_geometry(parts: list[KeyComponent], text: str) -> list[KeyComponent]:
        """Identity/address parts turned into geometry of the same tensor (``text`` names it)."""
        return [
            KeyComponent(text, "geometry", c.tensor, c.role)
            if c.kind in ("identity", "address")
            else c
            for c in parts
        ]

    def _call(self, node: ast.Call) -> list[KeyComponent]:
        func, args = node.func, node.args
        called = ast.unparse(func) if isinstance(func, (ast.Name, ast.Attribute)) else ""
        if called in self.geometry_fns and not node.keywords:
            text = ast.unparse(node)  # `*args` stays `args`: every argument, tensors included
            return [c for a in args for c in self._as_geometry(self.read(a), text)]
        if isinstance(func, ast.Name):
            if func.id in ("id", "hash") and args:
                return self._tensor(args[0], "identity", ast.unparse(node))
            if func.id == "len" and args:
                return [KeyComponent(ast.unparse(node), "meta", *self.role(args[0]))]
            if func.id in _PASS_CALLS:
                return [c for a in args for c in self.read(a)]
        if isinstance(func, ast.Attribute):
            base = func.value
            if func.attr == "data_ptr":
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute):
                    base = base.func.value  # t.untyped_storage().data_ptr()
                return self._tensor(base, "address", ast.unparse(node))
            if func.attr in _META_METHODS:
                return [KeyComponent(ast.unparse(node), "meta", *self.role(base))]
            if func.attr in ("items", "values", "keys"):
                return self.read(base)
            inner = self._read(base)
            if func.attr in _CONTENT_METHODS and any(c.kind == "content" for c in inner):
                return inner  # t.detach().cpu().numpy().tobytes(): still the content
            if func.attr in ("tobytes", "numpy", "item", "tolist", "__bytes__"):
                return self._tensor(base, "content", ast.unparse(node))
        # Any other call: conservatively, its key depends on everything passed in.
        parts = [c for a in args for c in self.read(a)]
        parts += [c for kw in node.keywords for c in self.read(kw.value)]
        if isinstance(func, ast.Attribute):
            parts += self._read(func.value)
        return parts
