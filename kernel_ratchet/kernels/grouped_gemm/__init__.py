"""Grouped GEMM for MoE layers (bf16 and FP8 blockwise), tokens sorted by expert.

Files: ``kernel.py`` (bf16 Triton kernels + autograd), ``fp8.py`` (FP8 blockwise kernels +
autograd), ``configs.py`` (named tile buckets), ``reference.py`` (plain PyTorch truth),
``shapes.py`` (MoE shape sets from model configs), ``adapter.py`` (harness adapters),
``bench.py`` (full benchmark, ``python -m kernel_ratchet.kernels.grouped_gemm.bench``).
"""
