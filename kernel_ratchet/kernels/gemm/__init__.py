"""Dense GEMM (bf16/fp16 and FP8 tensorwise/rowwise/blockwise) with backward.

Files: ``kernel.py`` (the Triton kernel), ``launch.py`` (its launcher and the 16-bit Linear
with autograd), ``bf16_ws.py`` and ``fp8_block_ws.py`` (warp-specialized Gluon kernels for
sm_90 that the launcher routes the ``large`` bucket to), ``fp8.py`` (FP8 recipes with
autograd), ``configs.py`` (named shape buckets, the tunables file), ``reference.py`` (plain
PyTorch truth), ``vendor.py`` (cuBLAS / ``torch._scaled_mm`` baselines), ``shapes.py``,
``adapter.py`` (harness adapters), ``bench.py`` (full benchmark, ``python -m
kernel_ratchet.kernels.gemm.bench``), ``tune.py`` (config sweep).
"""
