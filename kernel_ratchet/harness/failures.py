"""Why the harness failed a shape, kept beside its CSV.

The frozen CSV says only ``Check=FAIL``; the reason (an SNR under its bar, a cached tensor
returned from a timed call, an exception) went to the harness's log alone, so a round's
decision read "Check=FAIL on 2 shape(s)" and a driver had to open the log to learn what to
fix. The harness writes ``<csv stem>.failures.json`` (``{shape label: first line of the
reason}``, failing shapes only) and a round's decision quotes it.
"""

from __future__ import annotations

import json
from pathlib import Path

#: How much of one reason a decision quotes.
QUOTED = 240


def path_for(csv: Path) -> Path:
    """The failures file of the harness CSV ``csv`` (one per CSV: a round writes several)."""
    csv = Path(csv)
    return csv.with_name(f"{csv.stem}.failures.json")


def write(csv: Path, reasons: dict[str, str]) -> None:
    """Write the first line of each failing shape's reason beside ``csv``."""
    first = {label: (why.strip().splitlines() or [""])[0] for label, why in reasons.items()}
    path_for(csv).write_text(json.dumps(first, indent=1, sort_keys=True) + "\n")


def read(csv: Path) -> dict[str, str]:
    """The reasons written beside ``csv``; {} when there are none (no file, or an unreadable
    one: a harness of an older version)."""
    try:
        data = json.loads(path_for(csv).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items()}


def summary(reasons: dict[str, str]) -> str:
    """One line: the shapes grouped by reason, ``"big, odd: CheatDetected: ..."``, reasons
    joined by ``"; "``, each cut at :data:`QUOTED` characters."""
    by_reason: dict[str, list[str]] = {}
    for label, why in reasons.items():
        by_reason.setdefault(why, []).append(label)
    parts = []
    for why, labels in by_reason.items():
        cut = why if len(why) <= QUOTED else why[: QUOTED - 3] + "..."
        parts.append(f"{', '.join(labels)}: {cut}")
    return "; ".join(parts)
