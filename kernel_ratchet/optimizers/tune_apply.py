"""Write a sweep's winner for one bucket into the configs file, for a campaign to decide.

    python -m kernel_ratchet.optimizers.tune_apply SWEEP_JSON ENTRY [--configs PATH]
        [--min-gain 0.03]

``SWEEP_JSON`` is the ``sweep.json`` of :mod:`kernel_ratchet.kernels.gemm.tune`. ``ENTRY``
names the configs file's entry the winner goes to: ``CONFIGS/bf16_bwd/tiny``, or an
instead-table's (``FEW_ROWS_INSTEAD/bf16/tiny``). The candidates are ranked on the swept GEMMs
the shipped configs run that entry for (geomean speed against the vendor:
:func:`kernel_ratchet.kernels.gemm.tune_cases.bucket_scores`): a ``CONFIGS`` entry
without the GEMMs an instead-table takes over, an instead-table's entry on those alone. The
best one is written in place of the entry's config, one literal per field that differs, every
other byte kept. Nothing is decided here: the command prints what the sweep measured (the
geomean of the config shipped when it ran and of the winner, and the GEMM the winner loses most
on) and the ``ratchet validate`` line that decides it. Exit 1 when no candidate beats the
config shipped when the sweep ran by ``--min-gain``, or the entry already is the winner
(nothing is written); 2 for an entry the file does not have.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from kernel_ratchet.kernels.gemm import configs
from kernel_ratchet.kernels.gemm.launch_plan import ws16_config
from kernel_ratchet.kernels.gemm.tune_cases import (
    _named,
    bucket_scores,
    geomean_speed,
    parse_config,
    worst_gemm,
)
from kernel_ratchet.knobs.model import KnobError
from kernel_ratchet.knobs.tunables import parse_tunables, set_knobs

#: The Linear's GEMMs the warp-specialized 16-bit kernel takes where ``WS16_CONFIGS`` has their
#: bucket (its A is K-major: not the weight gradient's).
WS16_GEMMS = ("bf16.fwd", "bf16.da")


def runs_entry(entry: str) -> Callable[..., bool]:
    """``keep(kind, M, N, K, what=None)``: whether the shipped configs run ``entry`` for that
    GEMM (a ``CONFIGS`` entry does not serve the GEMMs an instead-table takes over, nor those of
    ``what`` that ``WS16_CONFIGS`` or ``WS16_FITTED`` route to the warp-specialized kernel; an
    instead-table's entry serves only its own)."""
    table, kind, bucket = entry.split("/")[-3:]
    cfg = getattr(configs, table, {}).get(kind, {}).get(bucket)

    def keep(k: str, M: int, N: int, K: int, what: str | None = None) -> bool:
        if what in WS16_GEMMS and ws16_config(k, M, N, K, configs.DEFAULT_SMS) is not None:
            return False
        return cfg is not None and configs.config_for(k, M, N, K) == cfg

    return keep


def candidate(
    results: list[dict], entry: str, min_gain: float, keep: Callable[..., bool] | None = None
) -> tuple[str, str]:
    """(the winning config's repr or "", what the sweep measured) for ``entry`` (its last two
    parts: kind and bucket), on the swept GEMMs ``keep`` accepts."""
    kind, bucket = entry.split("/")[-2:]
    speeds = bucket_scores(results, keep=keep).get((kind, bucket), {})
    # only the entry's kernel's configs go into it; another kernel's launches (the Gluon
    # kernels' candidates of a sweep) are its own table's to decide
    speeds = {c: v for c, v in speeds.items() if c == "shipped" or c.startswith("GemmConfig(")}
    if not speeds:
        return "", f"the sweep has no {kind} GEMM that {entry} serves and every config ran"
    scores = {c: geomean_speed(v) for c, v in speeds.items()}
    best = max(scores, key=scores.__getitem__)
    ship = scores.get("shipped")
    n = len(speeds[best])
    said = (
        f"{kind} {bucket}, {n} GEMMs: shipped when swept {ship or float('nan'):.3f}, best "
        f"{scores[best]:.3f} of the vendor {_named(best)}{worst_gemm(speeds, best)}"
    )
    if best == "shipped" or ship is None or scores[best] < ship * (1 + min_gain):
        return "", f"{said}; no candidate beats that by {min_gain:.0%}"
    return best, said


def apply(text: str, entry: str, cfg: str) -> str:
    """``text`` with ``entry``'s config made ``cfg`` (a ``GemmConfig`` repr)."""
    want = parse_config(cfg)
    knobs = parse_tunables(text).entries.get(entry)
    if knobs is None:
        raise KnobError(f"no entry {entry!r} in the configs file")
    changes = {
        f.name: getattr(want, f.name)
        for f in fields(want)
        if f.name in knobs.knobs and knobs.knobs[f.name].value != getattr(want, f.name)
    }
    return set_knobs(text, entry, changes) if changes else text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.optimizers.tune_apply")
    p.add_argument("sweep", help="sweep.json written by kernel_ratchet.kernels.gemm.tune")
    p.add_argument("entry", help="the configs entry, e.g. CONFIGS/bf16_bwd/tiny")
    p.add_argument("--configs", default=configs.__file__, help="the configs file to edit")
    p.add_argument("--min-gain", type=float, default=0.03, help="smallest geomean gain written")
    args = p.parse_args(argv)
    parts = args.entry.split("/")
    if len(parts) < 3:
        p.error(f"ENTRY is TABLE/kind/bucket, got {args.entry!r}")
    path = Path(args.configs)
    text = path.read_text()
    entries = parse_tunables(text).entries
    if args.entry not in entries:
        print(
            f"error: no entry {args.entry!r} in {path}; known: {sorted(entries)}", file=sys.stderr
        )
        return 2
    results = json.loads(Path(args.sweep).read_text())["results"]
    best, said = candidate(results, args.entry, args.min_gain, runs_entry(args.entry))
    print(said)
    if not best:
        return 1
    new = apply(text, args.entry, best)
    if new == text:
        print(f"{args.entry} is already {_named(best)}: nothing written")
        return 1
    path.write_text(new)
    short = _named(best)
    print(f"{args.entry} -> {short} written to {path}; decide it with:")
    print(
        f'ratchet validate --level full --hypothesis "..." --change "{args.entry}: {short}" '
        f'--expected "the sweep: {said}"'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
