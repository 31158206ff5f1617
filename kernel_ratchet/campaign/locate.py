"""Finding a campaign directory: by name, or the project's most recent one."""

from __future__ import annotations

from pathlib import Path

import yaml

from kernel_ratchet.campaign.lock import CampaignLock
from kernel_ratchet.campaign.manifest import load_manifest
from kernel_ratchet.campaign.state import Phase, State
from kernel_ratchet.errors import CampaignError, LockError
from kernel_ratchet.profile.schema import Profile


def list_campaigns(profile: Profile) -> list[Path]:
    """Campaign directories under the campaign root, oldest first."""
    base = profile.campaign_root_path
    if not base.is_dir():
        return []
    found = []
    for d in base.iterdir():
        mf = d / "manifest.yaml"
        if d.is_dir() and mf.exists():
            found.append((_created(mf), d.name, d))
    return [d for _, _, d in sorted(found)]


def _created(manifest: Path) -> str:
    """The manifest's ``created`` stamp; "" for one that does not parse (opening that campaign
    reports the manifest's problem)."""
    try:
        data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return ""
    return str(data.get("created", "")) if isinstance(data, dict) else ""


def find_campaign(profile: Profile, name: str | None = None) -> Path:
    """The campaign named ``name``, or the most recent one; raises CampaignError (naming the
    known campaigns) when there is none."""
    campaigns = list_campaigns(profile)
    if name:
        for d in campaigns:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in campaigns) or "none"
        raise CampaignError(
            f"no campaign named {name!r} under {profile.campaign_root_path} (known: {known})"
        )
    if not campaigns:
        raise CampaignError(
            f"no campaign under {profile.campaign_root_path}; start one with `ratchet init --op OP`"
        )
    return campaigns[-1]


def refuse_parallel(profile: Profile, op: str) -> None:
    """Raise CampaignError (exit 5) when a campaign on ``op`` is still open: a second one would
    switch the branch under the first (``init`` and ``run`` start one on purpose with
    ``--another``); LockError (exit 6) when another process drives it right now, whose
    advice (resume, report, close) could not run until that process ends."""
    still_open = [
        (d, d.name, phase)
        for d in list_campaigns(profile)
        if load_manifest(d).target_op == op
        and (phase := State.load(d).phase) in (Phase.INITIALIZED, Phase.OPTIMIZING)
    ]
    if not still_open:
        return
    path, name, phase = still_open[-1]
    try:
        with CampaignLock(path):
            pass
    except LockError as exc:
        raise LockError(f"{exc}; give --another to start a second campaign on op {op}") from None
    except OSError:  # a lock file this user cannot open: the advice below still holds
        pass
    if phase is Phase.INITIALIZED:  # no baseline: nothing to report or resume yet
        how = f"measure its baseline (`ratchet baseline --campaign {name}`)"
    else:
        how = (
            f"continue it (`ratchet validate --campaign {name}` or `ratchet resume`), end it "
            "with `ratchet report`"
        )
    how += f", close it unreported (`ratchet close --campaign {name} --reason TEXT`)"
    raise CampaignError(
        f"campaign {name} on op {op} is still open: {how}, or give --another to start a "
        "second campaign on the same op"
    )
