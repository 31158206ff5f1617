"""What an optimizer may read before a round (:func:`build_context`), and the files no round
may change (:func:`protected_paths`), fingerprinted around a proposal to tell which it
touched."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.lineage.kernel import incumbent_bytes
from kernel_ratchet.campaign.record import read_record, verified_ineffective
from kernel_ratchet.campaign.tips import read_tips, tips_path
from kernel_ratchet.optimizers.base import OptimizerContext


def protected_paths(c: Campaign) -> list[Path]:
    """Files a round must never change: ratchet.yaml, the generated harness, the adapter
    module and the files named by the focused test command."""
    out = [c.profile.path, c.dir / "quick_test_bench.py"]
    mod = c.m.adapter.split(":")[0].replace(".", "/")
    for cand in (c.root / f"{mod}.py", c.root / mod / "__init__.py"):
        if cand.exists():
            out.append(cand)
    with contextlib.suppress(ValueError):
        for tok in shlex.split(c.m.test_command):
            p = c.root / tok.split("::")[0]
            if p.is_file():
                out.append(p)
            elif p.is_dir() and tok not in (".", ""):
                out.extend(sorted(p.rglob("*.py")))
    return out


def fingerprint(paths: list[Path]) -> dict[str, str | None]:
    """sha256 of each path's bytes (None: missing), to tell which files a proposal touched."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths
    }


def build_context(c: Campaign, analysis: Mapping[str, Any] | None) -> OptimizerContext:
    """What the optimizer may read before the next round (the incumbent, records, tips)."""
    paths = [c.round_dir(r.round) / "round.json" for r in c.state.closed]
    records = [read_record(p) for p in paths if p.exists()]
    sources = {}
    for rel in c.m.kernel_source:
        data = incumbent_bytes(c.ctx, rel)
        if data is not None:
            sources[rel] = data.decode("utf-8")
    tp = tips_path(c.profile.tips_root_path, c.m.target_gpu, c.m.target_op, c.m.target_backend)
    return OptimizerContext(
        root=c.root,
        manifest=dataclasses.asdict(c.m),
        sources=sources,
        rounds=tuple(records),
        ineffective=tuple(verified_ineffective(records)),
        tips=read_tips(tp),
        analysis=analysis,
        tunables=c.op.tunables,
        knobs=c.op.knobs,
        campaign_dir=c.dir,
        round_no=c.state.next_round,
        protected=tuple(os.path.relpath(p, c.root) for p in protected_paths(c)),
    )
