"""The paired A/B's input seeds and its correctness checks.

Every input of an A/B derives from its secret (:func:`round_seed`); the check that opens it
runs every shape on both sides with the seed of :data:`CHECK_ROUND`, the two sides of a shape
at once (a check times nothing, and each side runs in its own process). The checks can also
be made early, beside other work that times nothing (:func:`precheck`: a round's focused
test), and handed to the A/B, which reuses a check only when the worker it times on made it
with its own seed (:func:`check_shape`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from kernel_ratchet.harness import op_census
from kernel_ratchet.harness.ab_rule import SequentialRule
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.paired_run import Failure

SIDES = ("incumbent", "candidate")
#: Round index used for the correctness-check seed.
CHECK_ROUND = -1
#: Checks already made, by ``(side, label)``: ``(the worker that made it, its seed, its result,
#: its seconds)``; see :func:`precheck`.
Prechecked = Mapping[tuple[str, str], tuple[Any, int, Any, float]]


def round_seed(secret: int, round_index: int, label: str) -> int:
    """Input seed of one shape in one round, derived from the campaign secret (63 bits), as
    :data:`~kernel_ratchet.harness.paired_run.SEED_POLICY` states it.

    Unpredictable without the secret, so a candidate cannot precompute outputs per seed.
    """
    digest = hashlib.sha256(f"{secret}:{round_index}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _timed_check(worker: Any, shape: Shape, seed: int) -> tuple[Any, float]:
    """(one worker's check of ``shape``, its seconds)."""
    c0 = time.monotonic()
    return worker.check(shape, seed), time.monotonic() - c0


def check_shape(
    pool: Executor,
    workers: Mapping[str, Any],
    shape: Shape,
    seed: int,
    prechecked: Prechecked | None = None,
) -> tuple[dict[str, tuple[Any, float]], bool]:
    """Both sides' check of ``shape`` with ``seed``, at once on ``pool``: ``({side: (result,
    seconds)}, whether every side's came from ``prechecked``)``. A kept check counts only when
    the same worker made it with the same seed."""
    done: dict[str, tuple[Any, float]] = {}
    futures = {}
    for side, worker in workers.items():
        kept = (prechecked or {}).get((side, shape.label))
        if kept is not None and kept[0] is worker and kept[1] == seed:
            done[side] = (kept[2], kept[3])
        else:
            futures[side] = pool.submit(_timed_check, worker, shape, seed)
    done.update({side: f.result() for side, f in futures.items()})
    return done, not futures


def precheck(
    workers: Mapping[str, Any], shapes: Sequence[Shape], secret: int
) -> dict[tuple[str, str], tuple[Any, int, Any, float]]:
    """The correctness checks an A/B with ``seed=secret`` on these ``workers`` (by side) would
    start with, made now, both sides of a shape at once; they stop at the first failing shape,
    as the A/B would. Pass the result as ``run_paired(prechecked=...)``."""
    out: dict[tuple[str, str], tuple[Any, int, Any, float]] = {}
    with ThreadPoolExecutor(max_workers=len(workers), thread_name_prefix="kr-precheck") as pool:
        for shape in shapes:
            seed = round_seed(secret, CHECK_ROUND, shape.label)
            done, _ = check_shape(pool, workers, shape, seed)
            for side, (res, secs) in done.items():
                out[(side, shape.label)] = (workers[side], seed, res, secs)
            if not all(res.ok for res, _ in done.values()):
                break
    return out


def checked(
    done: Mapping[str, tuple[Any, float]],
    label: str,
    logs: Mapping[str, str],
    refuse_vendor_ops: bool,
) -> Failure | None:
    """The failure both sides' checks of ``label`` (``done``: side -> (result, seconds)) end
    the A/B with, or None: a failing side's (the incumbent's when both fail), then, with
    ``refuse_vendor_ops``, a candidate whose call ran vendor-class ATen operations the
    incumbent's call did not (:mod:`.op_census`; category ``"backend"``)."""
    for side in SIDES:
        res = done[side][0]
        if not res.ok:
            return Failure(side, "check", label, res.category, res.detail, logs[side])
    if not refuse_vendor_ops:
        return None
    ops = [(done[side][0].payload or {}).get("vendor_ops") or {} for side in SIDES]
    extra = op_census.added(*ops)
    if not extra:
        return None
    why = op_census.describe(extra, label)
    return Failure("candidate", "check", label, "backend", why, logs["candidate"])


def precision_failure(
    snr: Mapping[str, Mapping[str, Mapping[str, float]]],
    logs: Mapping[str, str],
    rule: SequentialRule[Any],
) -> Failure | None:
    """Contract step 2, last: the candidate's SNRs against the incumbent's on the same inputs
    (``snr``: side -> label -> output -> dB; the rule judges); a drop is a failure of category
    "precision"."""
    why = rule.precision_drop(snr["incumbent"], snr["candidate"])
    if why is None:
        return None
    label = next(iter(snr["candidate"]), "")
    return Failure("candidate", "check", label, "precision", why, logs["candidate"])
