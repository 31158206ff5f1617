"""Dense GEMM (bf16/fp16 and FP8 tensorwise/rowwise/blockwise) with backward."""
