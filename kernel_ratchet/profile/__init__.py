"""The handoff profile (ratchet.yaml): schema, loading, DEFINE_TARGET checklist, env check."""

from __future__ import annotations

from kernel_ratchet.profile.loader import find_profile, load_profile
from kernel_ratchet.profile.schema import OpProfile, Profile

__all__ = ["OpProfile", "Profile", "find_profile", "load_profile"]
