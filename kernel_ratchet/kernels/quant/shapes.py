"""Shape sets of the memory-bound FP8 quantization ops: ``M`` rows x ``N`` columns (K = 0).

Activation-like tensors of the MoE models in :mod:`kernel_ratchet.kernels.grouped_gemm.shapes`
(tokens x hidden, routed rows x intermediate), sized so one call moves 0.1-0.7 GB (well past
the 60 MB L2), plus odd sizes (ragged 128-groups) and interpreter-sized ones.
"""

from __future__ import annotations

from kernel_ratchet.harness.adapter import Shape


def quant_target() -> list[Shape]:
    """Default target_shapes of the quant campaigns."""
    return [
        Shape("dsv3_act_8192x7168", 8192, 7168),
        Shape("mixtral_act_16384x4096", 16384, 4096),
        Shape("qwen3_30b_act_32768x2048", 32768, 2048),
        Shape("mixtral_inter_8192x14336", 8192, 14336),
        Shape("dsv3_routed_65536x2048", 65536, 2048),
        Shape("odd_12345x4000", 12345, 4000),
    ]


def tiny_cpu() -> list[Shape]:
    """Interpreter-sized shapes, including ragged groups along both axes."""
    return [
        Shape("tiny_128x256", 128, 256),
        Shape("tiny_odd_200x300", 200, 300),
        Shape("tiny_odd_1x130", 1, 130),
        Shape("tiny_odd_257x64", 257, 64),
    ]


def gpu_test() -> list[Shape]:
    """Real hidden sizes, fewer rows: the correctness check (float64 SNR on the host) stays fast."""
    return [
        Shape("dsv3_act_2048x7168", 2048, 7168),
        Shape("mixtral_inter_1024x14336", 1024, 14336),
        Shape("odd_3001x4000", 3001, 4000),
    ]
