"""What of an op's ``ratchet.yaml`` entry changed since its campaign froze it.

A campaign freezes its op at ``ratchet init`` (the manifest): the campaign type, the kernel
files, the focused test, the adapter or the op's description. Every later command reads the
manifest, so an edit of ``ratchet.yaml`` does not reach an open campaign; a user who edits it to
fix a problem must hear that the campaign will not see the fix.
"""

from __future__ import annotations

from kernel_ratchet.campaign.lineage.workspace import WORKSPACE
from kernel_ratchet.campaign.manifest import Manifest
from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX
from kernel_ratchet.profile.schema import Profile


def drift(profile: Profile, m: Manifest) -> list[str]:
    """``ops.<op>.<key>`` for each frozen key whose ``ratchet.yaml`` value now differs."""
    op = profile.ops.get(m.target_op)
    if op is None:
        return []
    pairs = [
        ("campaign_type", op.campaign_type, m.campaign_type),
        ("kernel_source", list(op.kernel_source), list(m.kernel_source)),
    ]
    if m.execution_mode != WORKSPACE:  # a workspace campaign rewrites these for its copy
        pairs += [
            ("test", op.test, m.test_command),
            (_adapter_key(m.adapter), op.adapter, m.adapter),
        ]
    return [f"ops.{m.target_op}.{key}" for key, now, frozen in pairs if now != frozen]


def _adapter_key(spec: str) -> str:
    """How the user names what the adapter spec holds."""
    if spec.startswith(DESCRIBED_PREFIX):
        return "function/inputs/outputs/work (the op's description)"
    return "adapter"


def drift_note(profile: Profile, m: Manifest) -> str | None:
    """The warning a command opening the campaign prints, or None when nothing drifted."""
    keys = drift(profile, m)
    if not keys:
        return None
    return (
        f"ratchet.yaml changed since campaign {m.campaign} began ({', '.join(keys)}): the "
        "campaign keeps what it froze at init and does not see the change; to measure with it, "
        f"end this campaign (`ratchet report`, or `ratchet close --campaign {m.campaign} "
        "--reason TEXT`) and start a new one"
    )
