"""``ratchet export``: a campaign's records, copied where they can be committed.

The records are what a campaign's numbers rest on: its manifest and state, its logs (the
optimization log, the performance trend), its REPORT and calibration when written, and per
round the summary, the typed record, the candidate's diff and the paired A/B's result (its
per-round times, from which every CI can be recomputed; a round escalated to the full level
has two, ``paired.json`` of the quick level and ``paired_full.json`` of the full level, which
decided it). Not copied: the worktrees, the kernel snapshots, profiles, harness CSVs and
worker logs, which are large, machine-bound or rebuilt from the rest. With ``traces`` each
round's timing trace (``timings.jsonl``: every timing request's samples and SM clocks) comes
too. ``environment.json`` says what each round measured on: from its ``provenance.json``,
the GPU (name, driver, maximum clocks), the versions (python, torch, triton, CUDA, ...), the
timing engine and the environment hash; not the environment variables or the host, which
name the machine's paths. The records name files relative to the project, so the copy reads
the same on any machine. A destination named ``*.tar.gz`` or ``*.tgz`` gets the same files as
one archive, under a folder of the archive's name: one file to carry off a machine that hands
back few.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from kernel_ratchet.errors import CampaignError, UsageError

#: Files of the campaign directory, copied when present.
CAMPAIGN_FILES = ("manifest.yaml", "state.json", "report.md", "calibration.json")
#: Files of a round, by where they are in ``rounds/round-N`` -> name in the copy's round folder.
ROUND_FILES = {
    "summary.md": "summary.md",
    "round.json": "round.json",
    "artifacts/candidate.diff": "candidate.diff",
    "artifacts/paired.json": "paired.json",
    # a round escalated to the full level: that level's A/B decided it
    "artifacts/full/paired.json": "paired_full.json",
}
TRACE = {
    "artifacts/paired/timings.jsonl": "timings.jsonl",
    "artifacts/full/paired/timings.jsonl": "timings_full.jsonl",
}
#: Destination names that make an export one gzipped tar archive.
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
#: The suffixes of every file an export writes (records, not code).
RECORD_SUFFIXES = (".md", ".json", ".jsonl", ".yaml", ".diff", *ARCHIVE_SUFFIXES)


def is_archive(dest: Path) -> bool:
    """Whether an export to ``dest`` writes one archive rather than a folder."""
    return Path(dest).name.endswith(ARCHIVE_SUFFIXES)


def export_records(cdir: Path, dest: Path, *, traces: bool = False) -> list[Path]:
    """Copy the records of the campaign in ``cdir`` into ``dest`` (module docstring); returns
    the files written, relative to ``dest`` (to the archive's folder where :func:`is_archive`).
    Raises UsageError (a destination to choose again) when ``dest`` holds anything (nothing is
    overwritten) or lies inside the campaign, and CampaignError when ``cdir`` has no
    manifest."""
    cdir, dest = Path(cdir).resolve(), Path(dest).resolve()
    if not (cdir / "manifest.yaml").is_file():
        raise CampaignError(f"{cdir} is not a campaign directory (no manifest.yaml)")
    if dest == cdir or cdir in dest.parents:
        raise UsageError(f"export into a folder outside the campaign, not {dest}")
    if is_archive(dest):
        return _archive(cdir, dest, traces)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(
            f"{dest} already holds files; export into a new or empty folder (nothing is "
            "overwritten)"
        )
    pairs = [(cdir / name, Path(name)) for name in CAMPAIGN_FILES]
    pairs += [(p, Path("logs") / p.name) for p in sorted((cdir / "logs").glob("*.md"))]
    per_round = {**ROUND_FILES, **(TRACE if traces else {})}
    for rdir in sorted((cdir / "rounds").glob("round-*"), key=_round_number):
        pairs += [(rdir / src, Path("rounds") / rdir.name / to) for src, to in per_round.items()]
    written = []
    for src, rel in pairs:
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
            written.append(rel)
    environment = measured_on(cdir)
    if environment:
        (dest / ENVIRONMENT).write_text(json.dumps(environment, indent=1) + "\n")
        written.append(Path(ENVIRONMENT))
    return written


#: The export's summary of what each round measured on (see the module docstring).
ENVIRONMENT = "environment.json"
#: Where a round's harness wrote its provenance, by level, and what of it an export keeps.
PROVENANCE = {"artifacts/provenance.json": "", "artifacts/full/provenance.json": "full"}
GPU_KEYS = ("name", "driver_version", "max_sm_clock_mhz", "max_mem_clock_mhz")


def measured_on(cdir: Path) -> dict[str, Any]:
    """Per round (and level, where a round escalated), the GPU, versions, timing engine and
    environment hash its harness recorded; {} where no round recorded any."""
    rounds: dict[str, Any] = {}
    for rdir in sorted((cdir / "rounds").glob("round-*"), key=_round_number):
        for src, level in PROVENANCE.items():
            try:
                prov = json.loads((rdir / src).read_text())
            except (OSError, ValueError):
                continue
            gpu = prov.get("gpu") or {}
            rounds[f"{rdir.name} {level}".strip()] = {
                "device": prov.get("device"),
                "gpu": {k: gpu.get(k) for k in GPU_KEYS} if gpu else None,
                "versions": prov.get("versions"),
                "engine": prov.get("engine"),
                "environment_hash": prov.get("environment_hash"),
            }
    if not rounds:
        return {}
    hashes = {r["environment_hash"] for r in rounds.values()}
    same = "one environment" if len(hashes) == 1 else f"{len(hashes)} environments"
    return {"how": f"each round's harness provenance ({same})", "rounds": rounds}


def _archive(cdir: Path, dest: Path, traces: bool) -> list[Path]:
    """The export of ``cdir`` as the archive ``dest``, its files under a folder of its name."""
    if dest.exists():
        raise UsageError(f"{dest} already exists; name a new archive (nothing is overwritten)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    folder = dest.name.removesuffix(next(s for s in ARCHIVE_SUFFIXES if dest.name.endswith(s)))
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        written = export_records(cdir, Path(tmp) / folder, traces=traces)
        part = Path(tmp) / dest.name
        with tarfile.open(part, "w:gz") as tar:
            tar.add(Path(tmp) / folder, arcname=folder)
        part.replace(dest)  # whole or not at all: a half-written archive never has its name
    return written


def _round_number(rdir: Path) -> int:
    tail = rdir.name.removeprefix("round-")
    return int(tail) if tail.isdigit() else -1
