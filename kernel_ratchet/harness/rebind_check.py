"""The rebind check of a worker's ``check`` request: new values written into the same input
tensors (same ``id()`` and ``data_ptr``) must change the outputs accordingly (an output cache
keyed on identity, or work skipped on repeated inputs, does not)."""

from __future__ import annotations

from typing import Any


def run(
    session: Any,
    case: Any,
    snap: Any,
    shape: Any,
    seed: int,
    sizes: list[int],
    thresholds: Any,
    kept: Any = None,
) -> str:
    """New values written into the same input tensors (same id() and data_ptr): the outputs
    must follow them. Raises CheatDetected when they do not; returns the check's name.
    ``kept``: the in-place fields (:class:`~kernel_ratchet.harness.inplace.InPlace`)."""
    from kernel_ratchet.harness import anticheat as ac
    from kernel_ratchet.harness import inplace as ip
    from kernel_ratchet.harness import timed_checks as tc
    from kernel_ratchet.harness.correctness import check_outputs

    ad = session.adapter
    fresh = ad.make_case(shape, tc.derive_seed(seed, 1), session.device)
    if not ac.rebind(case, snap, fresh):
        return "rebind skipped: cases of two seeds differ in structure"
    del fresh
    snap = ac.snapshot_inputs(case, snap)
    if kept:
        kept.keep(case, refresh=True)  # the values this call will see
    ac.scrub_allocator(sizes, session.device)
    got = ad.outputs(case)
    ac.check_output_types(got)
    session.sync()
    ac.verify_inputs(snap, kept.paths() if kept else frozenset())
    ref = ip.reference(ad, case, kept)
    session.sentinel.ready_to_compare()
    again = check_outputs(got, ref, thresholds)
    if not again.passed:
        raise ac.CheatDetected(
            "after new values were written into the same input tensors (same id() and "
            f"data_ptr) the outputs did not follow ({again.reason}): an output cache "
            "keyed on identity, or work skipped on repeated inputs"
        )
    return "rebind"
