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


def shrink(value: int) -> int:
    """A small size for ``value``: itself when small, else one in [16, 64) that keeps a
    non-power-of-two size odd-looking (masking paths still run)."""
    return value if value <= SMALL else 16 + value % (SMALL - 16)


def shrunk(shape: Shape) -> Shape:
    """``shape`` with every size shrunk (groups to at most MAX_GROUPS)."""
    params = {
        k: shrink(v) if isinstance(v, int) and not isinstance(v, bool) else v
        for k, v in shape.params.items()
    }
    return dataclasses.replace(
        shape,
        M=shrink(shape.M),
        N=shrink(shape.N),
        K=shrink(shape.K),
        B=min(shape.B, MAX_GROUPS),
        params=params,
    )


def rehearsal_profile(profile: Profile, op: str) -> Profile:
    """``profile`` with op ``op``'s shapes replaced by its rehearsal shapes."""
    o = profile.op(op)
    spec = o.rehearse_shapes
    if spec is None:
        sys.path.insert(0, str(profile.root))
        try:
            shapes = [shrunk(s) for s in load_shapes(o.shapes)]
        finally:
            sys.path.remove(str(profile.root))
        spec = INLINE_PREFIX + json.dumps([s.to_dict() for s in shapes])
    ops = {**profile.ops, op: dataclasses.replace(o, shapes=spec)}
    return dataclasses.replace(profile, ops=ops)
