"""The shapes of a CPU rehearsal (``ratchet run --rehearse --op OP``) for any op.

A rehearsal runs the campaign's mechanics in the Triton interpreter, so it needs shapes the
interpreter finishes in seconds: the op's ``rehearse_shapes`` when ``ratchet.yaml`` gives them,
else its target shapes shrunk symbol by symbol (:func:`shrink`), labels kept.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys

from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX, INLINE_PREFIX, Shape, load_shapes
from kernel_ratchet.harness.described_spec import sizes_of, written, written_symbols
from kernel_ratchet.profile.schema import Profile

#: Sizes at or below this stay as they are; larger ones map into [16, 64).
SMALL = 64
#: A shape whose work (:func:`shape_work`) is at most this is rehearsed as it
#: is: shrinking it would only break what its sizes keep (a width that is a multiple of the
#: op's group size), for no time saved.
KEEP_WORK = 1 << 18
#: Groups (B) of a rehearsal shape at most.
MAX_GROUPS = 4
#: The focused check's tile-crossing shapes take a size into [TILE, 2 * TILE): past one tile of
#: 64 or 128, where a chunked loop runs more than once and a persistent grid wraps.
TILE = 128
#: Elements (the product of a shape's sizes) above which no tile-crossing shape is added: the
#: interpreter walks about a million a second.
CROSSING_ELEMENTS = 2_000_000
#: Shrunk target shapes the CPU check also runs as they are, at most (the cheapest first).
AS_IS = 2
#: A size that bounds an integer input's values (``"[N] int64 < V"``: class ids, tokens) keeps
#: at least this many values: ids past 127 and 255 (an index kept in 7 or 8 bits) still occur.
INDEX_MIN = 300


def shrink(value: int, floor: int = 0) -> int:
    """A small size for ``value``: itself when small, else one in [16, 64) that keeps a
    non-power-of-two size odd-looking (masking paths still run); at least ``floor`` (never
    above ``value``)."""
    small = value if value <= SMALL else 16 + value % (SMALL - 16)
    if small < floor:
        small = floor + value % 7  # not a round number either
    return min(value, small)


def shrunk(shape: Shape, index_sizes: frozenset[str] = frozenset()) -> Shape:
    """``shape`` with every size shrunk (groups to at most MAX_GROUPS); the sizes named in
    ``index_sizes`` bound an integer input's values and keep :data:`INDEX_MIN`."""

    def size(name: str, v: int) -> int:
        return shrink(v, INDEX_MIN if name in index_sizes else 0)

    params = {
        k: size(k, v) if isinstance(v, int) and not isinstance(v, bool) else v
        for k, v in shape.params.items()
    }
    return dataclasses.replace(
        shape,
        M=size("M", shape.M),
        N=size("N", shape.N),
        K=size("K", shape.K),
        B=min(shape.B, MAX_GROUPS),
        params=params,
    )


def crossing(original: Shape, small: Shape, described: bool) -> list[Shape]:
    """Besides the shrunk ``small``, one shape per size of ``original`` above 2 * TILE that
    the shrink took under TILE, with that size alone taken into [TILE, 2 * TILE) (its
    remainder mod TILE kept): shrunk sizes stay under 64, so a loop over tiles of 64 or 128
    or a persistent grid over the rows never ran more than once. Shapes whose work
    (:func:`shape_work`) passes :data:`CROSSING_ELEMENTS` are left out."""
    core = ("M", "N", "K")
    sizes = {**{n: getattr(original, n) for n in core}, **original.params}
    out = []
    for name, v in sizes.items():
        now = getattr(small, name) if name in core else small.params.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 2 * TILE or now >= TILE:
            continue
        wide = TILE + v % TILE
        if name in core:
            shape = dataclasses.replace(small, **{name: wide})
        else:
            shape = dataclasses.replace(small, params={**small.params, name: wide})
        shape = dataclasses.replace(shape, label=f"{small.label}.{name}{wide}")
        if shape_work(shape, described) <= CROSSING_ELEMENTS:
            out.append(shape)
    return out


def check_shapes(profile: Profile, op: str) -> list[Shape]:
    """The shapes the op's built-in check runs without a GPU: its rehearsal shapes and, where
    they were shrunk, the tile-crossing shapes of its largest shape (:func:`crossing`) and up
    to :data:`AS_IS` shrunk target shapes as they are where the interpreter runs them in about
    a second or two (:data:`CROSSING_ELEMENTS`): a size past a chunk boundary far above any
    tile (a vocabulary past 65536) is exercised only there."""
    o = profile.op(op)
    shapes = load_shapes(rehearsal_profile(profile, op).op(op).shapes)
    if o.rehearse_shapes is not None:
        return shapes
    described = (o.adapter or "").startswith(DESCRIBED_PREFIX)
    original = load_shapes(o.shapes)
    big = max(range(len(original)), key=lambda i: shape_work(original[i], described))
    shrunk_ones = [s for s in original if shape_work(s, described) > KEEP_WORK]
    cheap = sorted(shrunk_ones, key=lambda s: shape_work(s, described))
    as_is = [
        dataclasses.replace(s, label=f"{s.label}.as-is")
        for s in cheap[:AS_IS]
        if shape_work(s, described) <= CROSSING_ELEMENTS
    ]
    return shapes + crossing(original[big], shapes[big], described) + as_is


def index_sizes(adapter_spec: str) -> frozenset[str]:
    """The symbols that bound a described op's integer inputs (empty for an adapter class)."""
    from kernel_ratchet.harness.described_spec import description_of
    from kernel_ratchet.harness.symbolic import expression_symbols

    desc = description_of(adapter_spec)
    bounds = [t.high for t in desc.inputs.values()] if desc else []
    return frozenset().union(*(expression_symbols(b) for b in bounds if isinstance(b, str)))


def rehearsal_profile(profile: Profile, op: str) -> Profile:
    """``profile`` with op ``op``'s shapes replaced by its rehearsal shapes: its
    ``rehearse_shapes``, else its shapes shrunk where their work passes :data:`KEEP_WORK`."""
    o = profile.op(op)
    spec = o.rehearse_shapes
    if spec is None:
        sys.path.insert(0, str(profile.root))
        try:
            keep = index_sizes(o.adapter or "")
            described = (o.adapter or "").startswith(DESCRIBED_PREFIX)
            shapes = [
                s if shape_work(s, described) <= KEEP_WORK else shrunk(s, keep)
                for s in load_shapes(o.shapes)
            ]
        finally:
            sys.path.remove(str(profile.root))
        given = written_symbols(o.shapes)  # only the symbols the op's shapes have
        spec = INLINE_PREFIX + json.dumps([written(s, given.get(s.label)) for s in shapes])
    ops = {**profile.ops, op: dataclasses.replace(o, shapes=spec)}
    return dataclasses.replace(profile, ops=ops)


def shape_work(shape: Shape, described: bool) -> int:
    """Multiply-adds or elements of one shape: M·N·max(K, 1)·max(B, 1), or for an op described
    in ratchet.yaml the product of every size symbol its shape binds (any names, e.g. a
    vocabulary ``V``); a bundled op's params are settings, not sizes."""
    if described:
        return math.prod(max(v, 1) for v in sizes_of(shape).values())
    return shape.M * shape.N * max(shape.K, 1) * max(shape.B, 1)
