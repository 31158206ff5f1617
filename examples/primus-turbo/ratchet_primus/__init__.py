"""Call shapes of Primus-Turbo's ops for kernel-ratchet (see ../ratchet.yaml)."""
