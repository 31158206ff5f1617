"""``python -m kernel_ratchet.cli``: the ``ratchet`` command."""

from __future__ import annotations

from kernel_ratchet.cli import main

main()
