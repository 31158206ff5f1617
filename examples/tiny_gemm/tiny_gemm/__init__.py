"""A tiny target project for kernel-ratchet: one Triton GEMM that runs in the interpreter."""
