"""The shapes of a CPU rehearsal (``ratchet run --rehearse --op OP``) for any op.

A rehearsal runs the campaign's mechanics in the Triton interpreter, so it needs shapes the
interpreter finishes in seconds: the op's ``rehearse_shapes`` when ``ratchet.yaml`` gives them,
else its target shapes shrunk symbol by symbol (:func:`shrink`), labels kept.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from kernel_ratchet.harness.adapter import INLINE_PREFIX, Shape, load_shapes
from kernel_ratchet.profile.schema import Profile

#: Sizes at or below this stay as they are; larger ones map into [16, 64).
SMALL = 64
#: Groups (B) of a rehearsal shape at most.
MAX_GROUPS = 4
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


def index_sizes(adapter_spec: str) -> frozenset[str]:
    """The symbols that bound a described op's integer inputs (empty for an adapter class)."""
    from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX
    from kernel_ratchet.harness.description import Description
    from kernel_ratchet.harness.symbolic import expression_symbols

    if not adapter_spec.startswith(DESCRIBED_PREFIX):
        return frozenset()
    raw = json.loads(adapter_spec[len(DESCRIBED_PREFIX) :])
    raw.pop("schema", None)
    bounds = [t.high for t in Description.from_dict(raw).inputs.values()]
    return frozenset().union(*(expression_symbols(b) for b in bounds if isinstance(b, str)))


def rehearsal_profile(profile: Profile, op: str) -> Profile:
    """``profile`` with op ``op``'s shapes replaced by its rehearsal shapes."""
    o = profile.op(op)
    spec = o.rehearse_shapes
    if spec is None:
        sys.path.insert(0, str(profile.root))
        try:
            keep = index_sizes(o.adapter or "")
            shapes = [shrunk(s, keep) for s in load_shapes(o.shapes)]
        finally:
            sys.path.remove(str(profile.root))
        spec = INLINE_PREFIX + json.dumps([s.to_dict() for s in shapes])
    ops = {**profile.ops, op: dataclasses.replace(o, shapes=spec)}
    return dataclasses.replace(profile, ops=ops)
