"""The dynamic half of the real-training transfer check (SPEC section 8) inside a round.

After an ACCEPT, incumbent and candidate each run the guard's fresh-tensor simulation in a fresh
worker on the largest active shape (the smallest in a CPU rehearsal): the benchmark idiom (the
same tensors every iteration) against the training idiom (fresh activations and grad_out each
step, the weight updated in place so its ``_version`` moves), with cache hit counts on the
kernel modules. Comparing the two sides cancels what both share (e.g. L2 reuse of repeated
tensors); what is left is the part of the candidate's gain that exists only in the benchmark
idiom. The round is rolled back as REJECT-as-overfit when the training-idiom gain falls well
short of the benchmark-idiom gain, or when only the candidate's own simulation reads OVERFIT (a
cache hit on a fresh tensor).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.rounds.paired import _specs
from kernel_ratchet.guard.transfer_result import MIN_REL_GAP
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import Worker

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

MIN_GAIN = 0.02  # below this benchmark gain there is nothing to transfer
#: Noise floor of one side's simulation on the CPU rehearsal (fraction of its benchmark time;
#: the GPU keeps the guard's MIN_REL_GAP). Interpreter timings move by tens of percent between
#: idioms (fresh tensors cost allocations), which can read as OVERFIT at 3%; planted overfits
#: on the CPU example are ~100x, so 50% still catches them.
MIN_REL_GAP_CPU = 0.5


def _simulated(c: CampaignContext, labels: list[str], cuda: bool) -> Shape:
    """The active shape the simulation runs on: on a GPU the largest (the most memory traffic
    for a cache to skip); on the CPU the smallest, as each interpreter call of a rehearsal
    costs a tenth of a second and more, and the check there exercises its mechanics and
    catches gross overfits only (:data:`MIN_REL_GAP_CPU`), which a small shape shows as well."""
    by = {s["label"]: Shape.from_dict(s) for s in c.m.target_shapes}
    pick = max if cuda else min
    return pick((by[x] for x in labels), key=lambda s: s.B * s.M * s.N * max(s.K, 1))


def _modules(c: CampaignContext) -> tuple[str, ...]:
    return tuple(
        os.path.splitext(k)[0].replace("/", ".") for k in c.m.kernel_source if k.endswith(".py")
    )


def dynamic_check(
    c: CampaignContext,
    art: Path,
    labels: list[str],
    workers: Mapping[str, Worker] | None = None,
) -> dict[str, Any]:
    """Run both sides' simulation; returns {"verdict": OVERFIT | TRANSFERS | NOT-RUN, ...}.
    ``workers``: the round's live workers by side (:mod:`.workers`), reused; a side without
    one gets a fresh worker logging to ``transfer_<side>.log``."""
    import torch  # here, not at import: readers of the records need no torch

    from kernel_ratchet.guard.dynamic_transfer import judge_worker_traces

    cuda = torch.cuda.is_available()
    shape = _simulated(c, labels, cuda)
    # On the CPU, five repeats of three steps: each side's idioms alternate (bench, train, then
    # train, bench), and a median of five stands two repeats slowed by other processes where
    # a median of three stood one (a loaded 2-core machine once read a clean 2.4x candidate
    # as OVERFIT with three).
    steps, repeats = (8, 5) if cuda else (3, 5)
    floor = MIN_REL_GAP if cuda else MIN_REL_GAP_CPU
    seed = secrets.randbits(31)
    sides = dict(zip(("incumbent", "candidate"), _specs(c), strict=True))
    out: dict[str, Any] = {
        "shape": shape.label,
        "steps": steps,
        "repeats": repeats,
        "min_rel_gap": floor,
    }
    for side, spec in sides.items():
        kept = (workers or {}).get(side)
        with nullcontext(kept) if kept else Worker(spec, art / f"transfer_{side}.log") as w:
            r = w.transfer(shape, seed, steps=steps, repeats=repeats, cache_modules=_modules(c))
        if not r.ok:
            first = r.detail.splitlines()[0] if r.detail else ""
            why = f"the {side}'s simulation did not run ({r.category}: {first})"
            return {**out, "verdict": "NOT-RUN", "reason": why}
        out[side] = judge_worker_traces(r.payload, floor)
    return {**out, **_verdict(out["incumbent"], out["candidate"])}


def _verdict(inc: dict[str, Any], cand: dict[str, Any]) -> dict[str, Any]:
    bench_gain = inc["bench_ms"] / cand["bench_ms"] - 1.0
    train_gain = inc["train_ms"] / cand["train_ms"] - 1.0
    noise = (inc["noise_ms"] + cand["noise_ms"]) / max(cand["train_ms"], 1e-9)
    nums = (
        f"benchmark-idiom gain {bench_gain:+.2%}, training-idiom gain {train_gain:+.2%} "
        f"(noise ±{noise:.2%}) on {cand['label']}"
    )
    if cand["verdict"] == "OVERFIT" and inc["verdict"] != "OVERFIT":
        return {
            "verdict": "OVERFIT",
            "bench_gain": bench_gain,
            "train_gain": train_gain,
            "noise": noise,
            "reason": f"only the candidate's simulation reads OVERFIT ({cand['reason']}); " + nums,
        }
    short = bench_gain - max(noise, MIN_GAIN)
    if bench_gain > MIN_GAIN and train_gain < short and train_gain < 0.5 * bench_gain:
        return {
            "verdict": "OVERFIT",
            "bench_gain": bench_gain,
            "train_gain": train_gain,
            "noise": noise,
            "reason": "the gain does not transfer to fresh tensors: " + nums,
        }
    return {
        "verdict": "TRANSFERS",
        "bench_gain": bench_gain,
        "train_gain": train_gain,
        "noise": noise,
        "reason": nums,
    }
