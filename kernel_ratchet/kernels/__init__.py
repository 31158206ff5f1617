"""The bundled kernel pack: one folder per op family (kernel, launch, configs, reference,
shapes, adapter, bench), described in the repository's ``ratchet.yaml``."""
