"""kernel-ratchet: disciplined GPU-kernel optimization campaigns."""

from __future__ import annotations

__version__ = "0.1.0"
