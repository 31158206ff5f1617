"""The knobs a search may move in a kernel's source, read and rewritten as plain text.

Three sources, one model (:mod:`.model`): a tunables file (:mod:`.tunables`), what the kernel
files already have (``@triton.autotune`` configs and launch-site arguments, :mod:`.discover`),
and knobs declared in ``ratchet.yaml`` (:mod:`.declared`). :mod:`.space` gathers them per op.
Every rewrite changes one expression's bytes and keeps every other byte of the file.
"""
