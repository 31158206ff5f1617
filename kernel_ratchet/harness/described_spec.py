"""The specs of an op described in ``ratchet.yaml`` and of shapes written there, read and
written without torch (reading a profile needs none; the adapter that runs is
:mod:`kernel_ratchet.harness.described`).

A described op becomes the adapter spec ``described:{json}`` (:func:`described_spec`), inline
shapes the shape-set spec ``inline:[json]`` (:func:`inline_spec`, read by :func:`inline_shapes`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX, INLINE_PREFIX, Shape
from kernel_ratchet.harness.description import Description

#: Shape keys that are not symbols.
SHAPE_FIELDS = ("label", "dtype")
#: The value a Shape's own size takes where a shape does not give it (no such symbol).
UNGIVEN: Mapping[str, int] = {"M": 1, "N": 1, "K": 0, "B": 1}


def described_spec(description: Mapping[str, Any], schema: str) -> str:
    """The adapter spec of a described op (validated first: ValueError names the key)."""
    Description.from_dict(description)
    return DESCRIBED_PREFIX + json.dumps({"schema": schema, **description})


def description_of(spec: str) -> Description | None:
    """The description inside an adapter spec made by :func:`described_spec`, read without
    importing its functions; None for an adapter class."""
    if not spec.startswith(DESCRIBED_PREFIX):
        return None
    raw = json.loads(spec[len(DESCRIBED_PREFIX) :])
    raw.pop("schema", None)
    return Description.from_dict(raw)


def shape_from_symbols(entry: Mapping[str, Any]) -> Shape:
    """A Shape from ``{label, dtype?, M: 4096, N: 4096, T: 7}``: M, N, K, B are the Shape's own
    fields (M and N 1 when absent), other symbols go to ``params``."""
    if not isinstance(entry, Mapping) or "label" not in entry:
        raise ValueError(f"a shape is a mapping with a label and symbol values, got {entry!r}")
    dims = {k: v for k, v in entry.items() if k not in SHAPE_FIELDS}
    for k, v in dims.items():
        if isinstance(v, bool):  # a flag (causal: true), for "${...}" constants, not a size
            continue
        if not isinstance(v, int) or v < 0:
            raise ValueError(
                f"shape {entry['label']!r}: {k} must be a non-negative int (a size), or true or "
                'false (a flag for a "${...}" constant)'
            )
    core = {k: dims.pop(k, v) for k, v in UNGIVEN.items()}
    return Shape(
        label=str(entry["label"]),
        **core,
        params=dims,
        dtype=entry.get("dtype"),
    )


def symbols_of(shape: Shape) -> dict[str, int]:
    """The symbol values a shape binds: M, N, K, B and its integer params (flags included)."""
    out = {"M": shape.M, "N": shape.N, "K": shape.K, "B": shape.B}
    out.update({k: v for k, v in shape.params.items() if isinstance(v, int)})
    return out


def sizes_of(shape: Shape) -> dict[str, int]:
    """The sizes among a shape's symbols: its flags (``causal: true``) are none."""
    return {k: v for k, v in symbols_of(shape).items() if not isinstance(v, bool)}


def written(shape: Shape, symbols: Collection[str] | None = None) -> dict[str, Any]:
    """``shape`` as an ``inline:`` spec carries it (read back the same by
    :func:`inline_shapes`): its label, its sizes by symbol, its dtype. Of M, N, K and B it
    gives those in ``symbols`` (the ones its shape set was written with; None: M and N) and
    any off its default (:data:`UNGIVEN`), so that an op without K shows no ``K: 0``.
    Settings that are not integers keep the recorded form, under ``params``."""
    core = {"M": shape.M, "N": shape.N, "K": shape.K, "B": shape.B}
    named = {"M", "N"} if symbols is None else set(symbols)
    sizes = {k: v for k, v in core.items() if k in named or v != UNGIVEN[k]}
    if all(isinstance(v, int) and not isinstance(v, bool) for v in shape.params.values()):
        sizes.update(shape.params)
        sizes = sizes or {"M": shape.M, "N": shape.N}  # a shape gives at least one size
    else:
        sizes = {"M": shape.M, "N": shape.N, **sizes, "params": dict(shape.params)}
    return {"label": shape.label, **sizes, **({"dtype": shape.dtype} if shape.dtype else {})}


def written_symbols(spec: str) -> dict[str, list[str]]:
    """By shape label, the symbols an ``inline:`` spec gives its shapes with; a shape in the
    recorded form (under ``params``) and a module's shape set have none here."""
    if not spec.startswith(INLINE_PREFIX):
        return {}
    entries = json.loads(spec[len(INLINE_PREFIX) :])
    return {
        str(e["label"]): [k for k in e if k not in SHAPE_FIELDS]
        for e in entries
        if isinstance(e, Mapping) and "params" not in e
    }


def inline_spec(entries: list[Mapping[str, Any]]) -> str:
    """The shape-set spec of shapes written in ratchet.yaml (validated first), each with the
    symbols it was written with."""
    shapes = [(shape_from_symbols(e), [k for k in e if k not in SHAPE_FIELDS]) for e in entries]
    return INLINE_PREFIX + json.dumps([written(s, given) for s, given in shapes])


def inline_shapes(spec: str) -> list[Shape]:
    """The shapes of an ``inline:`` spec: each written as in ratchet.yaml (``{label, N: 8,
    V: 150}``: sizes by symbol) or as a recorded Shape (sizes past M, N, K, B under
    ``params``)."""
    try:
        entries = json.loads(spec[len(INLINE_PREFIX) :])
        if not isinstance(entries, list):
            raise ValueError("expected a JSON list of shapes")
        return [_inline_shape(d) for d in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise ProfileError(
            f"inline shapes do not validate ({exc}); write a JSON list of shapes as in "
            """ratchet.yaml, e.g. 'inline:[{"label": "s", "M": 64, "N": 128}]'"""
        ) from exc


def _inline_shape(entry: Any) -> Shape:
    if isinstance(entry, Mapping) and "params" in entry:
        return Shape.from_dict(entry)
    if isinstance(entry, Mapping) and not set(entry) - set(SHAPE_FIELDS):
        raise ValueError(f"shape {entry.get('label')!r} gives no size (M: 64, N: 128, ...)")
    return shape_from_symbols(entry)
