"""Grouped GEMM for MoE layers (bf16 and FP8 blockwise), tokens sorted by expert.

Files: ``kernel.py`` (bf16 Triton kernels), ``launch.py`` (bf16 launchers + autograd),
``fp8_kernel.py`` (FP8 blockwise Triton kernels), ``fp8.py`` (FP8 launchers + autograd),
``configs.py`` (named tile buckets), ``reference.py`` (plain PyTorch truth), ``shapes.py`` (MoE
shape sets from model configs), ``adapter.py`` (harness adapters), ``bench.py`` (full
benchmark, ``python -m kernel_ratchet.kernels.grouped_gemm.bench``), ``step_bench.py`` (its
``--step`` table against ``torch._grouped_mm``), ``tune.py`` (tile sweep).
"""
