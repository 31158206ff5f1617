"""Who drives the campaign: recorded so that ``ratchet resume`` continues the same way.

``optimizer.json`` holds the settings of the latest driver: ``{"name": "manual"}`` when a
person runs ``ratchet baseline``/``validate``, or an optimizer's
:meth:`~kernel_ratchet.optimizers.base.Optimizer.settings` when ``ratchet run``/``resume``
drives it (``{"name": "search", "knobs": [...]}``; no secrets: an agent's command is given
again). It is written when a command starts driving, before any round opens, so a round
interrupted by a crash or a signal is always attributed to its driver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.fsutil import atomic_write_json

DRIVER_FILE = "optimizer.json"
#: The driver recorded by the commands a person runs by hand.
MANUAL = "manual"


def record_driver(campaign_dir: Path, settings: Mapping[str, Any]) -> None:
    """Record ``settings`` (with a ``name``) as the campaign's current driver (no write when
    they are already the recorded ones: every manual round records its driver)."""
    if recorded_driver(campaign_dir) != dict(settings):
        atomic_write_json(Path(campaign_dir) / DRIVER_FILE, dict(settings))


def recorded_driver(campaign_dir: Path) -> dict[str, Any] | None:
    """The settings of the campaign's latest driver, or None before any was recorded."""
    path = Path(campaign_dir) / DRIVER_FILE
    return json.loads(path.read_text()) if path.exists() else None


def driven_by_hand(campaign_dir: Path) -> bool:
    """Whether a person drives the campaign: the manual driver, or none recorded (a campaign
    set up and run with ``init``/``baseline``/``validate`` only)."""
    last = recorded_driver(campaign_dir)
    return last is None or last.get("name") == MANUAL
