"""Whether an op's inputs follow their seed (a ``ratchet check`` line).

The paired A/B gives both sides the same seed, and the harness's rebinds ask for other seeds:
an adapter whose ``make_case`` draws from the global RNG (``torch.randn`` with no generator)
gives the two sides different inputs and the rebinds nothing new, and no gate says so. Here the
op's smallest rehearsal shape is built on the CPU three times: twice from one seed (the inputs
must match, bit for bit) and once from another (they should differ).
"""

from __future__ import annotations

import textwrap

from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.items import item as _item
from kernel_ratchet.profile.schema import OpProfile, Profile

WHAT = "inputs follow their seed (make_case)"


def seeded_inputs(profile: Profile, op: OpProfile) -> CheckItem:
    """Build the op's smallest rehearsal shape from seeds 1, 1 and 2 and compare the inputs."""
    from kernel_ratchet.harness import anticheat, digest
    from kernel_ratchet.harness.adapter import load_adapter, load_shapes
    from kernel_ratchet.profile.on_path import project_on_path
    from kernel_ratchet.profile.rehearsal import rehearsal_profile

    try:
        with project_on_path(profile.root):
            o = rehearsal_profile(profile, op.name).op(op.name)
            adapter = load_adapter(o.adapter)
            shape = min(load_shapes(o.shapes), key=lambda s: s.M * s.N * max(s.K, 1) * s.B)
            cases = [adapter.make_case(shape, seed, "cpu") for seed in (1, 1, 2)]
    except Exception as exc:  # noqa: BLE001 -- an adapter that needs a GPU: not judged here
        text = textwrap.shorten(str(exc), 160, placeholder=" ...")  # cut at a word
        detail = f"not checked on the CPU ({type(exc).__name__}: {text})"
        return CheckItem(f"{op.name}: {WHAT}", True, detail, warning=True)

    def sums(case: object) -> list[str]:
        return [digest.tensor_digest(t) for _, t in anticheat.tensors(case)]

    first, again, other = (sums(c) for c in cases)
    if first != again:
        return _item(
            op,
            WHAT,
            False,
            f"make_case gives different inputs for the same seed on {shape.label}: the two "
            "sides of a paired A/B would time different inputs",
            "draw every input from a torch.Generator seeded with make_case's `seed` (not the "
            "global RNG)",
        )
    if first and first == other:
        detail = (
            f"seeds 1 and 2 give the same inputs on {shape.label}: make_case ignores its seed, "
            "so the harness's fresh inputs are not fresh"
        )
        return CheckItem(f"{op.name}: {WHAT}", True, detail, warning=True)
    return _item(op, WHAT, True, f"same seed, same inputs; another seed, others ({shape.label})")
