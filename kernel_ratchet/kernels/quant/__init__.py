"""FP8 quantization kernels and their adapters."""
