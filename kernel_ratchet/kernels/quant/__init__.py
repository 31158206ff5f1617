"""FP8 quantization kernels and their adapters.

Files: ``kernel.py`` (Triton kernels), ``launch.py`` (entry points: tensorwise, rowwise, 1x128,
128x128), ``dual.py`` (row- and column-wise 1x128 from one read), ``reference.py`` (plain
PyTorch truth), ``shapes.py``, ``adapter.py`` (harness adapters), ``bench.py`` (full benchmark,
``python -m kernel_ratchet.kernels.quant.bench``).
"""
