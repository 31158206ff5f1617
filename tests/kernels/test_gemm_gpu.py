"""Dense GEMM ops on the GPU with their default (bucketed) configs: model and odd shapes,
forward and backward, every recipe, SPEC section 5 thresholds. Run on a CUDA GPU with
``pytest -m gpu tests/kernels/test_gemm*.py``.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.kernels.gemm import adapter as ad
from kernel_ratchet.kernels.gemm.shapes import ODD_SHAPES, model_shapes

pytestmark = pytest.mark.gpu

_MODEL_PICK = (
    "llama2-7b.qkv.mb1",
    "llama3.1-8b.gate_up.mb1",
    "qwen2.5-7b.down.mb1",
    "llama2-70b.attn_out.mb1",
    "qwen2.5-72b.gate_up.mb1",
    "llama3.1-8b.down.mb4",
)
SHAPES: dict[str, Shape] = {s.label: s for s in model_shapes() if s.label in _MODEL_PICK}
# E5M2 gradients are exercised on blockwise here; the tensorwise/rowwise E5M2 variants share
# every GEMM kernel and differ only in the quantization dtype (covered on the CPU).
SHAPES.update({s.label: s for s in ODD_SHAPES})
ADAPTERS = {
    "bf16": ad.GemmBf16,
    "fp8-tensorwise": ad.GemmFp8Tensorwise,
    "fp8-rowwise": ad.GemmFp8Rowwise,
    "fp8-blockwise": ad.GemmFp8Blockwise,
    "fp8-blockwise-e5m2": ad.GemmFp8BlockwiseE5M2,
}


@pytest.mark.parametrize("label", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("name", list(ADAPTERS), ids=list(ADAPTERS))
def test_op_on_gpu(name, label):
    adapter = ADAPTERS[name]()
    case = adapter.make_case(SHAPES[label], seed=0, device="cuda")
    got = adapter.outputs(case)
    ref = adapter.reference(case)
    res = check_outputs(got, ref, {k: adapter.threshold(k) for k in ref})
    assert res.passed, f"{res.reason}; snr={res.snr}"
    # The cheaper spot-check reference (cuBLAS in bf16) is itself close to the fp32 one, and
    # the honest outputs pass against it at their thresholds.
    spot = adapter.spot_reference(case)
    close = check_outputs(spot, ref, dict.fromkeys(ref, 45.0))
    assert close.passed, f"spot reference vs fp32 reference: {close.reason}"
    vs_spot = check_outputs(got, spot, {k: adapter.threshold(k) for k in ref})
    assert vs_spot.passed, f"outputs vs spot reference: {vs_spot.reason}"
    del spot
    # The timed path (forward/backward) must agree with the checked autograd path.
    out = adapter.forward(case)
    da, db = adapter.backward(case)
    timed = check_outputs({"out": out, "da": da, "db": db}, got, dict.fromkeys(got, 60.0))
    assert timed.passed, timed.reason
    del case, got, ref
    torch.cuda.empty_cache()


def _operand(rows: int, cols: int, dtype: torch.dtype, offset: int, gen: torch.Generator):
    """A ``[rows, cols]`` operand, ``offset`` elements into its buffer (1: off 16 bytes)."""
    buf = torch.empty(rows * cols + offset, device="cuda", dtype=dtype)
    t = buf[offset:].view(rows, cols)
    return t.copy_(torch.randn(rows, cols, device="cuda", generator=gen))


@pytest.mark.parametrize("M,N,K", [(7, 3584, 3584), (100, 1000, 1000), (1000, 5120, 1000)])
def test_bf16_repeated_calls_of_one_shape_with_other_operands(M, N, K):
    """Calls of one shape keep their results when the operands change between calls: dtype,
    16-byte alignment (views one element into their buffer), new storage; each checked
    against fp32 torch."""
    from kernel_ratchet.kernels.gemm.launch import gemm, gemm_backward

    gen = torch.Generator(device="cuda").manual_seed(0)
    calls = [(torch.bfloat16, 0), (torch.bfloat16, 0), (torch.bfloat16, 1), (torch.float16, 0)]
    for i, (dtype, offset) in enumerate(calls + [(torch.bfloat16, 1), (torch.bfloat16, 0)]):
        a, b = _operand(M, K, dtype, offset, gen), _operand(N, K, dtype, offset, gen)
        assert bool(a.data_ptr() % 16) == bool(offset)
        dout = _operand(M, N, dtype, 0, gen)
        out = gemm(a, b)
        da, db = gemm_backward(dout, a, b)
        af, bf, df = a.float(), b.float(), dout.float()
        for name, got, ref, k in (
            ("out", out, af @ bf.T, K),
            ("da", da, df @ bf, N),
            ("db", db, df.T @ af, M),
        ):
            torch.testing.assert_close(
                got.float(), ref, rtol=2e-2, atol=2e-2 * k**0.5, msg=f"call {i} {name}"
            )


@pytest.mark.parametrize("M,N,K", [(100, 1000, 1000), (4097, 3000, 2000), (383, 1000, 12289)])
def test_bf16_repeated_calls_on_a_side_stream_in_a_graph_and_under_a_launch_hook(M, N, K):
    """The direct launch of a repeated geometry (tile, persistent and stream-K kernels, their
    descriptors in a scratch kept per stream) on another stream, captured in a CUDA graph and
    replayed on new values, and with a profiler's launch hook installed (which it must call)."""
    from triton import knobs

    from kernel_ratchet.kernels.gemm.launch import gemm

    gen = torch.Generator(device="cuda").manual_seed(1)
    a, b = _operand(M, K, torch.bfloat16, 0, gen), _operand(N, K, torch.bfloat16, 0, gen)

    def close(got, what):
        ref = a.float() @ b.float().T
        torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2 * K**0.5, msg=what)

    close(gemm(a, b), "first call")
    close(gemm(a, b), "second call")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = gemm(a, b)
    torch.cuda.current_stream().wait_stream(side)
    close(out, "side stream")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = gemm(a, b)
    a.copy_(torch.randn(M, K, device="cuda", generator=gen))
    b.copy_(torch.randn(N, K, device="cuda", generator=gen))
    graph.replay()
    close(captured, "graph replay on new values")
    seen = []
    hook = seen.append
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        close(gemm(a, b), "under a launch hook")
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert seen, "the installed launch hook was not called"
