"""Whether this machine runs an op's shapes in useful time: any shapes with a CUDA GPU, only
small ones in Triton's interpreter (``ratchet check`` warns, ``ratchet init`` refuses)."""

from __future__ import annotations

import dataclasses
import json

from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX, INLINE_PREFIX, Shape, load_shapes
from kernel_ratchet.harness.described_spec import sizes_of, written, written_symbols
from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.on_path import project_on_path
from kernel_ratchet.profile.rehearsal import shape_work, shrink
from kernel_ratchet.profile.schema import Profile

#: Multiply-adds (Σ M·N·max(K, 1)·B over the target shapes) above which a campaign without a
#: GPU is refused: the Triton interpreter runs ~1e7-1e8 of them a second, so one 4096^3 GEMM
#: alone takes minutes and a real-model shape set takes hours per round.
CPU_WORK_LIMIT = 1e9
#: Elements (Σ over the target shapes) above which a memory-bound op's campaign without a GPU is
#: refused: the interpreter walks an element-wise kernel at ~1e6 elements a second (a fused
#: RMSNorm forward and backward of 16384 x 4096 took 87 s), so its budget is far smaller.
CPU_ELEMENT_LIMIT = 2e6


def device_check(
    profile: Profile,
    op: str,
    *,
    cuda: bool | None = None,
    shapes_spec: str | None = None,
    warn: bool = False,
) -> CheckItem:
    """Whether this machine can run the op's target shapes (``shapes_spec``: a campaign's own
    set) in useful time: always with a CUDA GPU; without one only when the shapes are small
    (CPU examples, rehearsals). ``warn``: a machine that cannot is a warning, not a failure
    (``ratchet check`` judges the description; ``init`` the campaign it would start here)."""
    import torch

    o = profile.op(op)
    name = f"{op}: a GPU for these shapes"
    if torch.cuda.is_available() if cuda is None else cuda:
        return CheckItem(name, True, "CUDA GPU present")
    shapes = _target_shapes(profile, o.shapes, shapes_spec)
    if shapes is None:
        return CheckItem(name, True, "shapes not loadable (see 'shapes loadable')")
    described = o.adapter.startswith(DESCRIBED_PREFIX)
    work = sum(shape_work(s, described) for s in shapes)
    what = "the product of every size symbol" if described else "M*N*K*B"
    limit = CPU_ELEMENT_LIMIT if o.campaign_type == "memory" else CPU_WORK_LIMIT
    if work <= limit:
        return CheckItem(name, True, f"no GPU; work {work:.2g} (sum of {what}) fits the CPU")
    detail = (
        f"no CUDA GPU here, and the {len(shapes)} target shapes of {op} hold work {work:.2g} "
        f"(sum of {what}: a GEMM's multiply-adds, an element-wise op's elements), over the "
        f"{limit:.0e} the Triton interpreter runs in useful time per round; CPU timings say "
        "nothing about a GPU kernel anyway"
    )
    symbols = written_symbols(shapes_spec or o.shapes).get(shapes[0].label)
    example = _small_example(shapes[0], described, symbols)
    fix = (
        f"run the campaign on a CUDA machine. To rehearse the loop here: ratchet init --op {op} "
        f"--rehearse, or ratchet run --op {op} --rehearse unattended (the op's "
        "rehearse_shapes, else its shapes shrunk), or give this campaign "
        f"small shapes: ratchet init --op {op} --shapes '{example}' "
        "(sizes by symbol, as in ratchet.yaml)"
    )
    if warn:
        return CheckItem(name, True, f"{detail}; {fix}", warning=True)
    return CheckItem(name, False, detail, fix)


def _target_shapes(profile: Profile, spec: str, shapes_spec: str | None) -> list[Shape] | None:
    """The op's shapes (``shapes_spec``: a campaign's own set), or None where they do not
    load (the checklist's 'shapes loadable' says why)."""
    try:
        with project_on_path(profile.root):
            return load_shapes(shapes_spec or spec)
    except Exception:  # noqa: BLE001 - reported by the shapes check
        return None


def work_check(profile: Profile, op: str, *, shapes_spec: str | None = None) -> CheckItem:
    """Whether every target shape (``shapes_spec``: a campaign's own set) holds work: M, N
    and B at least 1 (K may be 0, a memory-bound op's), and for an op described in
    ratchet.yaml every other size symbol too. A shape of no elements has no time to measure."""
    o = profile.op(op)
    name = f"{op}: every shape holds work"
    shapes = _target_shapes(profile, o.shapes, shapes_spec)
    if shapes is None:
        return CheckItem(name, True, "shapes not loadable (see 'shapes loadable')")
    described = o.adapter.startswith(DESCRIBED_PREFIX)
    empty = []
    for s in shapes:
        sizes = sizes_of(s) if described else {"M": s.M, "N": s.N, "B": s.B}
        zero = [k for k, v in sizes.items() if v == 0 and k != "K"]
        empty += [f"{s.label} ({', '.join(f'{k} = 0' for k in zero)})"] if zero else []
    if not empty:
        return CheckItem(name, True, f"{len(shapes)} shape(s), none of size 0")
    return CheckItem(
        name,
        False,
        f"{', '.join(empty)}: a shape of no elements has no time to measure",
        "give every size at least 1 (K may be 0 for a memory-bound op)",
    )


def _small_example(shape: Shape, described: bool, symbols: list[str] | None) -> str:
    """An ``inline:`` shape set of ``shape`` shrunk, its dtype and settings kept, written with
    its ``symbols`` (:func:`~kernel_ratchet.harness.described_spec.written`): what to pass to
    ``ratchet init --shapes`` for a campaign this machine runs."""
    params = {
        k: shrink(v) if described and isinstance(v, int) and not isinstance(v, bool) else v
        for k, v in shape.params.items()
    }
    sizes = {"M": shrink(shape.M), "N": shrink(shape.N), "K": shrink(shape.K)}
    small = dataclasses.replace(shape, label="s", **sizes, B=min(shape.B, 4), params=params)
    return INLINE_PREFIX + json.dumps([written(small, symbols)])
