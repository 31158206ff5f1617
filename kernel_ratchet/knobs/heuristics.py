"""The launch arguments a ``@triton.heuristics`` decorator sets, which a launch cannot move.

Triton's heuristics wrapper computes each of its keys from the call's arguments and writes it
over the launch keyword of that name: ``kernel[grid](x, num_warps=2)`` on a kernel whose
heuristics set ``num_warps`` runs with the heuristic's value, so a search move of that keyword
measures nothing. A literal dict (or a module-level name bound to one) says which keys; a dict
built by a call (``get_heuristic_config("softmax")``) does not, and then the launch options the
search would add on its own (``num_warps``, ``num_stages``) are left out, the keywords the
author wrote kept.
"""

from __future__ import annotations

import ast

from kernel_ratchet.guard.syntax import dotted, module_values

#: A kernel whose heuristics set keys no one can read statically.
UNKNOWN = None


def heuristic_keys(tree: ast.Module) -> dict[str, frozenset[str] | None]:
    """Per kernel with a heuristics decorator, the launch arguments it sets (None: unknown)."""
    module = module_values(tree)
    out: dict[str, frozenset[str] | None] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for dec in fn.decorator_list:
            if not (isinstance(dec, ast.Call) and dotted(dec.func).endswith("heuristics")):
                continue
            arg = dec.args[0] if dec.args else next((k.value for k in dec.keywords), None)
            if isinstance(arg, ast.Name):
                arg = module.get(arg.id, arg)
            if isinstance(arg, ast.Dict) and all(isinstance(k, ast.Constant) for k in arg.keys):
                keys = frozenset(str(k.value) for k in arg.keys)  # type: ignore[union-attr]
                known = out.get(fn.name, frozenset())
                out[fn.name] = None if known is None else known | keys
            else:
                out[fn.name] = UNKNOWN
    return out
