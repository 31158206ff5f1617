"""The search-space lines of ``ratchet check``: the tunables file and what the search can move.

A tunables file that holds nothing to move fails (the profile names a file the search cannot
use); an op with nothing to move at all passes with a warning (a campaign driven by a person or
an agent needs no knobs), saying that ``ratchet run --optimizer search`` will refuse to start.
"""

from __future__ import annotations

import ast

from kernel_ratchet.knobs.space import SearchSpace, collect, read_sources
from kernel_ratchet.knobs.tunables import MODULE
from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.items import item as _item
from kernel_ratchet.profile.schema import OpProfile, Profile


def _tunables(profile: Profile, op: OpProfile, space: SearchSpace) -> CheckItem:
    if op.tunables is None:
        return _item(op, "tunables file", True, "none given (optional)")
    if not (profile.root / op.tunables).is_file():
        return _item(
            op,
            "tunables file",
            False,
            f"{op.tunables} does not exist",
            f"correct ops.{op.name}.tunables or remove it",
        )
    if any(fs.rel == op.tunables and fs.entries(op.name) for fs in space.files):
        return _item(op, "tunables file", True, op.tunables)
    why = next((p for p in space.problems if p.startswith(f"{op.tunables}: ")), None)
    if why is not None:  # it does not parse, or names what it does not define
        return _item(op, "tunables file", False, why, f"correct {op.tunables} (see docs/search.md)")
    return _item(
        op,
        "tunables file",
        False,
        f"{op.tunables}: nothing in it can move",
        "give it a SEARCH_SPACE naming its knobs and values (see docs/search.md), or remove "
        f"ops.{op.name}.tunables",
    )


def _search_space(op: OpProfile, space: SearchSpace) -> CheckItem:
    """What ``ratchet run --optimizer search`` can move; optional, so empty is a warning.
    What makes the search refuse to start (a kernel file that does not parse, a knob declared
    where none can be) fails, as ``ratchet run`` would."""
    refused = [p for p in space.problems if not (op.tunables and p.startswith(f"{op.tunables}"))]
    if refused:
        return _item(
            op,
            "search space",
            False,
            "; ".join(refused),
            f"correct the files or ops.{op.name}.knobs: `ratchet run --optimizer search` "
            "refuses to start until then (a person or an agent can still run rounds)",
        )
    if space.unmatched:
        bad = "; ".join(f"{d.name} in {d.where}" for d in space.unmatched)
        return _item(
            op,
            "search space",
            False,
            f"declared knobs match nothing: {bad}",
            f"correct ops.{op.name}.knobs: each names a module-level constant, an assignment in "
            "`within`, a launch keyword or an autotune config key of a kernel_source file",
        )
    if space.empty(op.name):
        return CheckItem(
            f"{op.name}: search space",
            True,
            "nothing to move: `ratchet run --optimizer search` refuses to start; declare "
            f"knobs under ops.{op.name}.knobs (docs/search.md)"
            + (
                f"; autotune configs it cannot read: {'; '.join(space.unread)}"
                if space.unread
                else ""
            ),
            warning=True,
        )
    unread = _unread_constants(op, space)
    if unread:
        return CheckItem(
            f"{op.name}: search space",
            True,
            f"{space.describe(op.name)}; no kernel file reads {', '.join(unread)}: the search "
            "would spend rounds on them (drop them from SEARCH_SPACE)",
            warning=True,
        )
    return _item(
        op,
        "search space",
        True,
        f"{space.describe(op.name)} in the op's files: {_named(space, op.name)} (a search "
        "moves only the knobs of kernels the baseline launches)",
    )


def _named(space, op: str, most: int = 16) -> str:
    """The knobs the search may move, by the entry (kernel, config) that holds them."""
    by: dict[str, list[str]] = {}
    for key, name, _ in space.knobs(op)[:most]:
        by.setdefault(key, []).append(name)
    more = len(space.knobs(op)) - most
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in by.items()) + (
        f" and {more} more" if more > 0 else ""
    )


def _unread_constants(op: OpProfile, space: SearchSpace) -> list[str]:
    """Module-level constants the search would move that no file of the op reads: no load of
    the name, no attribute of that name (``configs.BLOCK_M`` from another file)."""
    read: set[str] = set()
    for fs in space.files:
        try:
            tree = ast.parse(fs.text)
        except SyntaxError:
            return []  # named as a problem elsewhere
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                read.add(n.id)
            elif isinstance(n, ast.Attribute):
                read.add(n.attr)
    module = {
        k
        for fs in space.files
        for e in fs.entries(op.name)
        if e.key == MODULE
        for k in fs.tunables.knob_space(e)
    }
    return sorted(module - read)


def op_space(profile: Profile, op: OpProfile) -> SearchSpace:
    """The search space of ``op`` over the files as they are in the project now."""
    rels = [*op.kernel_source, *([op.tunables] if op.tunables else [])]
    sources = read_sources(profile.root, rels)
    return collect(sources, op.kernel_source, op.tunables, op.knobs)


def search_items(profile: Profile, op: OpProfile) -> list[CheckItem]:
    """The "tunables file" and "search space" lines of the checklist for ``op``."""
    space = op_space(profile, op)
    return [_tunables(profile, op, space), _search_space(op, space)]
