"""``manifest.yaml``: what the campaign is (SPEC section 4), written at init, completed at
BASELINE (frozen schema, representative shapes) and never edited by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.errors import CampaignError

#: The SPEC's manifest fields, in order; extra fields follow them.
SPEC_FIELDS = (
    "target_op",
    "target_backend",
    "target_lang",
    "target_gpu",
    "execution_mode",
    "project_skill",
    "performance_target",
    "primary_metric",
    "target_shapes",
    "kernel_source",
    "test_command",
    "benchmark_command",
    "quick_command",
    "representative_shapes",
    "git_commit",
    "git_branch",
    "max_iterations",
    "created",
)


@dataclass(frozen=True)
class Manifest:
    """The campaign's ``manifest.yaml``: the SPEC's fields first, then what the tool needs
    (campaign type, adapter, timing, seed, starting commit, frozen CSV schema, ...)."""

    target_op: str
    target_backend: str
    target_lang: str
    target_gpu: str
    execution_mode: str
    project_skill: str
    performance_target: float | None
    primary_metric: str
    target_shapes: list[dict]
    kernel_source: list[str]
    test_command: str
    benchmark_command: str
    quick_command: str
    representative_shapes: list[str]
    git_commit: bool
    git_branch: str
    max_iterations: int
    created: str
    # extras
    campaign: str
    campaign_type: str
    adapter: str
    shape_set: str
    rebuild_command: str | None
    timing_engine: str
    timing_params: dict[str, Any]
    seed: int
    regression_threshold: float
    starting_commit: str | None
    branch_name: str | None
    original_branch: str | None = None  # the branch checked out when the campaign began
    efficiency_target: float | None = None
    hardware_peak: float | None = None
    csv_schema: dict[str, str] = field(default_factory=dict)

    @property
    def representative_shape_dicts(self) -> list[dict]:
        """The target-shape dicts of the representative labels (the quick level's SHAPES)."""
        return [s for s in self.target_shapes if s["label"] in self.representative_shapes]

    def level_shape_dicts(self, level: str) -> list[dict]:
        """The shape dicts a round at ``level`` measures: the representative ones (quick) or
        every target shape (full)."""
        return self.representative_shape_dicts if level == "quick" else list(self.target_shapes)

    def to_yaml(self) -> str:
        d = asdict(self)
        ordered = {k: d[k] for k in SPEC_FIELDS}
        ordered.update({k: v for k, v in d.items() if k not in ordered})
        return yaml.safe_dump(ordered, sort_keys=False, width=100)

    def save(self, campaign_dir: Path) -> None:
        atomic_write_text(Path(campaign_dir) / "manifest.yaml", self.to_yaml())

    def with_(self, **changes: Any) -> Manifest:
        return replace(self, **changes)


def load_manifest(campaign_dir: Path) -> Manifest:
    """Read ``manifest.yaml``; raises CampaignError when it is missing or its keys are not
    this version's."""
    path = Path(campaign_dir) / "manifest.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CampaignError(f"{path} is missing; this is not a campaign directory") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CampaignError(f"{path} is not valid YAML ({exc}); {_NOT_BY_HAND}") from None
    if not isinstance(data, dict):
        raise CampaignError(f"{path} is not a mapping of manifest keys; {_NOT_BY_HAND}")
    names = {f.name for f in fields(Manifest)}
    unknown = sorted(set(data) - names)
    missing = sorted(n for n in names if n not in data and n in SPEC_FIELDS)
    if unknown or missing:
        raise CampaignError(
            f"{path}: manifest does not match this version of kernel-ratchet "
            f"(unknown keys {unknown}, missing keys {missing}); it must not be edited by hand"
        )
    try:
        return Manifest(**{k: v for k, v in data.items() if k in names})
    except (TypeError, ValueError) as exc:
        raise CampaignError(f"{path}: {exc}; {_NOT_BY_HAND}") from None


_NOT_BY_HAND = "it is written by the tool and must not be edited by hand"
