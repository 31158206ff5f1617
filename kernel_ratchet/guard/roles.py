"""Which tensor a name refers to in a training step: the role heuristic of the static audit.

SPEC section 8 separates tensors by how they live across training steps: a *weight* keeps its
identity (and its ``_version`` moves at every optimizer step); *activations*, *grad_out*, their
*scales* and the *routing* tensors of a grouped op (tokens per expert) are fresh every step.

The audit only sees source text, so the role of a tensor is read from its name:

* ``weight``: ``w``, ``weight(s)``, ``w1``.., ``w_*``, ``*_weight``, ``wt``, ``self``/``module``
  /``layer`` (their identity is the weight holder's); and ``b`` when the file also names an ``a``
  (this codebase's Linear layout ``out = a @ bᵀ``: the second operand is the weight).
* ``grad_out``: ``dout``, ``grad_out(put)``, ``dy``, ``do``, ``grad*``, ``dout*`` (not ``g``:
  that is a group index as often as a gradient).
* ``scale``: any name containing ``scale`` or ``amax``, ``s``, ``sa``, ``sb``, ``sx``, ``sw``.
* ``routing``: ``group_lens``, ``tokens_per_expert``, ``m_sizes``, ``m_splits``, ``offsets``...
* ``activation``: ``x``, ``a``, ``input``, ``act``, ``h``, ``hidden*``, ``tokens``, ``out``...
* derived names inherit: a prefix ``q``/``q_`` and a suffix ``t``/``_t``/``_q``/``_fp8``/
  ``_data`` are stripped (``bt`` and ``qb`` are the weight's, ``qa`` the activation's).

ALL-CAPS names (``M``, ``K``, ``G``, ``BLOCK_M``) are dimensions or constants, never tensors.
Anything else is ``unknown``, which the audit treats like a non-weight (the conservative side).
A comment ``# ratchet: weight=b,w2 activation=x grad_out=g`` anywhere in a file overrides the
heuristic for those names in that whole file.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Mapping

ROLES = ("weight", "activation", "grad_out", "scale", "routing")
#: Roles whose tensors are fresh every training step (everything but the weight).
FRESH_ROLES = frozenset({"activation", "grad_out", "scale", "routing", "unknown"})

_WEIGHT = {"w", "weight", "weights", "wt", "self", "module", "layer", "mod", "linear", "param"}
_GRAD = {
    "dout",
    "d_out",
    "grad_out",
    "grad_output",
    "grad_outputs",
    "dy",
    "do",
    "grad",
    "gy",
    "dz",
    "dc",
    "grad_y",
    "out_grad",
    "upstream",
    "dgrad",
}
_SCALE = {"s", "sa", "sb", "sx", "sw", "sd", "amax", "inv_scale"}
_ROUTING = {
    "group_lens",
    "lens",
    "tokens_per_expert",
    "m_sizes",
    "m_splits",
    "counts",
    "offsets",
    "offs",
    "seg_indptr",
    "expert_ids",
    "topk_ids",
    "group_sizes",
    "batch_sizes",
    "cu_seqlens",
    "routing",
    "splits",
}
_ACT = {
    "x",
    "a",
    "inp",
    "input",
    "inputs",
    "act",
    "acts",
    "activation",
    "activations",
    "h",
    "hidden",
    "hidden_states",
    "tokens",
    "lhs",
    "mat1",
    "y",
    "out",
    "output",
    "c",
    "result",
    "xs",
    "feat",
    "features",
}
_PREFIX = ("q_", "q")
_SUFFIX = ("_fp8", "_data", "_q", "_t", "t", "_contig")
_ANNOTATION = re.compile(r"#\s*ratchet:\s*(?P<body>.*)$")


def _exact(name: str, linear_b: bool) -> str | None:
    if name in _GRAD or name.startswith(("grad_", "dout")):
        return "grad_out"
    if name in _ROUTING:
        return "routing"
    if name in _SCALE or "scale" in name or "amax" in name:
        return "scale"
    if name == "b":
        return "weight" if linear_b else None
    if (
        name in _WEIGHT
        or name.startswith(("w_", "weight_"))
        or name.endswith(("_weight", "_w"))
        or (name[:1] == "w" and name[1:].isdigit())
    ):
        return "weight"
    if name in _ACT or name.startswith(("hidden_", "act_", "x_", "input_")):
        return "activation"
    return None


def role_of(
    name: str, *, linear_b: bool = False, overrides: Mapping[str, str] | None = None
) -> str:
    """Role of one name: an override, else the heuristic above, else ``"unknown"``.

    ``linear_b`` says the file follows the ``a @ bᵀ`` convention (it names an ``a``).
    """
    if overrides and name in overrides:
        return overrides[name]
    if name.isupper():
        return "unknown"  # M, N, K, G, BLOCK_M: dimensions and constants, not tensors
    low = name.lower().lstrip("_")
    found = _exact(low, linear_b)
    if found:
        return found
    for pre in ("", *_PREFIX):
        if pre and not low.startswith(pre):
            continue
        stem = low[len(pre) :]
        for suf in ("", *_SUFFIX):
            if suf and not stem.endswith(suf):
                continue
            base = stem[: len(stem) - len(suf)] if suf else stem
            if base and (pre or suf):
                found = _exact(base, linear_b)
                if found:
                    return found
    return "unknown"


def annotations(source: str) -> dict[str, str]:
    """Role overrides from ``# ratchet: role=name[,name] ...`` comments of one source text.

    Unknown roles are ignored (the heuristic applies); a source that does not tokenize gives {}.
    """
    out: dict[str, str] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _ANNOTATION.search(tok.string)
        if not m:
            continue
        for item in m.group("body").replace(";", " ").split():
            role, _, names = item.partition("=")
            if role in ROLES:
                out.update({n.strip(): role for n in names.split(",") if n.strip()})
    return out


def names_linear_b(param_names: Iterable[str]) -> bool:
    """True when ``a`` is among the file's parameter names (the ``a @ bᵀ`` convention)."""
    return "a" in set(param_names)
