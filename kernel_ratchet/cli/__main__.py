"""``python -m kernel_ratchet.cli``: the ``ratchet`` command."""

from kernel_ratchet.cli import main

main()
