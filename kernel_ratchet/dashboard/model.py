"""What a campaign directory holds, read for the dashboard: typed records only, read-only.

:func:`load_campaign` reads ``manifest.yaml``, ``state.json``, every closed round's
``round.json`` (:class:`~kernel_ratchet.campaign.record.RoundRecord`), the ceilings and the
latest analysis under ``profiles/``, provenance, the driver, the calibration, the final
report and a workspace campaign's sync-back result. Nothing is parsed out of Markdown:
``report.md`` and the tips file are shown as they are. A file the campaign has not written
(yet) is None, and the page says "not recorded".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.driver import recorded_driver
from kernel_ratchet.campaign.manifest import Manifest, load_manifest
from kernel_ratchet.campaign.record import RoundRecord, read_record
from kernel_ratchet.campaign.state import ClosedEntry, State
from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.csv_schema import BenchTable, get_schema, read_csv
from kernel_ratchet.scoring.roofline import Ceilings

#: The largest part of a round's diff a page embeds (a generated kernel can be huge).
MAX_DIFF_CHARS = 60_000
_ROUND_DIR = re.compile(r"^round-(\d+)$")


@dataclass(frozen=True)
class RoundEntry:
    """A closed round: the state's index entry and its record (None when ``round.json`` is
    missing or unreadable; ``problem`` then says why)."""

    entry: ClosedEntry
    record: RoundRecord | None
    problem: str = ""

    @property
    def n(self) -> int:
        return self.entry.round


@dataclass(frozen=True)
class CampaignData:
    """One campaign as the dashboard shows it. Optional parts are None when not recorded."""

    dir: Path
    manifest: Manifest
    state: State
    rounds: tuple[RoundEntry, ...]
    ceilings: Ceilings | None
    analysis: dict[str, Any] | None
    provenance: dict[str, dict[str, Any]]
    driver: dict[str, Any] | None
    calibration: dict[str, Any] | None
    report: str | None
    tips: str | None
    sync_back: dict[str, Any] | None = None  # workspace-mode's sync-back/result.json

    @property
    def name(self) -> str:
        return self.manifest.campaign

    @property
    def on_cpu(self) -> bool:
        """Measured on the CPU (Triton kernels interpreted); its rounds may still have been
        accepted (only a round's own ``rehearsal`` says it never counts)."""
        return self.manifest.target_gpu == "cpu"

    def record(self, n: int) -> RoundRecord | None:
        return next((r.record for r in self.rounds if r.n == n), None)

    def table(self, rel: str | None) -> BenchTable | None:
        """A CSV of the campaign read against its frozen schema (None: absent or unreadable)."""
        if not rel:
            return None
        try:
            return read_csv(self.dir / rel, expected=get_schema(self.manifest.csv_schema["name"]))
        except (OSError, ValueError, KeyError, RatchetError):
            return None

    def diff(self, n: int) -> str | None:
        """Round ``n``'s candidate diff (cut at MAX_DIFF_CHARS), or None when not recorded."""
        path = self.dir / "rounds" / f"round-{n}" / "artifacts" / "candidate.diff"
        text = _text(path)
        if text is None or len(text) <= MAX_DIFF_CHARS:
            return text
        return text[:MAX_DIFF_CHARS] + f"\n... cut at {MAX_DIFF_CHARS} characters; see {path}\n"


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _round(cdir: Path, entry: ClosedEntry) -> RoundEntry:
    path = cdir / "rounds" / f"round-{entry.round}" / "round.json"
    try:
        return RoundEntry(entry, read_record(path))
    except FileNotFoundError:
        return RoundEntry(entry, None, "round.json is missing")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return RoundEntry(entry, None, f"round.json is unreadable ({type(exc).__name__}: {exc})")


def latest_analysis(cdir: Path) -> dict[str, Any] | None:
    """The newest ``profiles/round-N/analysis.json`` (by N), or None."""
    found = []
    for d in (cdir / "profiles").glob("round-*"):
        m = _ROUND_DIR.match(d.name)
        if m and (d / "analysis.json").is_file():
            found.append((int(m[1]), d / "analysis.json"))
    for _, path in sorted(found, reverse=True):
        a = _json(path)
        if isinstance(a, dict) and isinstance(a.get("shapes"), list):
            return a
    return None


def _ceilings(cdir: Path) -> Ceilings | None:
    d = _json(cdir / "profiles" / "ceilings.json")
    try:
        return Ceilings(**d) if isinstance(d, dict) else None
    except TypeError:
        return None


def _provenance(cdir: Path, state: State) -> dict[str, dict[str, Any]]:
    """Provenance of the baseline, the incumbent and the final validation, where recorded."""
    where = {"baseline (round-1)": cdir / "rounds" / "round-1" / "artifacts"}
    inc = state.incumbent_round
    if inc and inc != 1:
        where[f"incumbent (round-{inc})"] = cdir / "rounds" / f"round-{inc}" / "artifacts"
    where["final validation (report)"] = cdir / "report"
    out = {}
    for what, d in where.items():
        p = _json(d / "provenance.json")
        if isinstance(p, dict):
            out[what] = p
    return out


def load_campaign(cdir: Path, tips_file: Path | None = None) -> CampaignData:
    """Read campaign ``cdir`` (raises CampaignError when its manifest or state is missing or
    malformed, as every command does); ``tips_file``: the op's historical tips, when known."""
    cdir = Path(cdir)
    manifest = load_manifest(cdir)
    state = State.load(cdir)
    cal = _json(cdir / "calibration.json")
    return CampaignData(
        dir=cdir,
        manifest=manifest,
        state=state,
        rounds=tuple(_round(cdir, e) for e in state.closed),
        ceilings=_ceilings(cdir),
        analysis=latest_analysis(cdir),
        provenance=_provenance(cdir, state),
        driver=_safe_driver(cdir),
        calibration=cal if isinstance(cal, dict) else None,
        report=_text(cdir / "report.md"),
        tips=_text(tips_file) if tips_file else None,
        sync_back=_dict(_json(cdir / "sync-back" / "result.json")),
    )


def _dict(x: Any) -> dict[str, Any] | None:
    return x if isinstance(x, dict) else None


def _safe_driver(cdir: Path) -> dict[str, Any] | None:
    try:
        d = recorded_driver(cdir)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None
