"""Autotune decorators whose configs the search cannot read, and why.

The search reads an autotuner's candidates where they are written as literals: a list of
``triton.Config(...)`` calls, or a comprehension over literal candidates. Configs built by a
call (``configs=warps_kernel_configs()``) or listed as calls of a project's own helper
(``conv_config(128, 32, n_warps=8)``) hold values it cannot move. An op whose only knobs are
such configs looks empty to it; naming them says where to declare a knob instead.
"""

from __future__ import annotations

import ast

from kernel_ratchet.knobs.discover import config_lists


def _why(cfgs: ast.expr) -> str | None:
    """Why the configs expression ``cfgs`` holds nothing the search reads (None: it reads it)."""
    if isinstance(cfgs, ast.ListComp):
        return None
    if isinstance(cfgs, ast.List | ast.Tuple):
        calls = [e for e in cfgs.elts if isinstance(e, ast.Call)]
        other = [e for e in calls if not ast.unparse(e.func).endswith("Config")]
        if calls and len(other) == len(cfgs.elts):
            return f"calls of {ast.unparse(other[0].func)}(...), not triton.Config"
        return None
    text = ast.unparse(cfgs)
    return f"built at run time by {text if len(text) <= 60 else text[:57] + '...'}"


def unread_autotuners(rel: str, text: str) -> list[str]:
    """``file: kernel's autotune configs are ...`` for each autotune decorator of the Python
    file ``rel`` whose configs the search cannot read (none for a file that does not parse)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out = []
    for kernel, cfgs in config_lists(tree):
        why = _why(cfgs)
        if why:
            out.append(f"{rel}: {kernel}'s autotune configs are {why}")
    return out
