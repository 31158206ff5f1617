"""FP8 quantization ops: dual (dual.py) and the rowwise/blockwise adapters that
wrap launch.py, against the plain-PyTorch references. Interpreter on the CPU, real sizes on GPU.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape, load_adapter
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.runtime import run_shape
from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine
from kernel_ratchet.kernels.quant import shapes as QS
from kernel_ratchet.kernels.quant.adapter import (
    QuantFp8Block128Adapter,
    QuantFp8BlockwiseAdapter,
    QuantFp8DualAdapter,
    QuantFp8RowwiseAdapter,
)
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.dual_grouped import chunk_capacity, quant_fp8_dual_1x128_grouped
from kernel_ratchet.kernels.quant.launch import quant_fp8_blockwise_1x128

ADAPTERS = [
    QuantFp8RowwiseAdapter,
    QuantFp8BlockwiseAdapter,
    QuantFp8DualAdapter,
    QuantFp8Block128Adapter,
]


def _run(adapter_cls, shape, device):
    """As the harness loads it (in the interpreter, with its gaps filled)."""
    adapter = load_adapter(f"{adapter_cls.__module__}:{adapter_cls.__name__}")
    case = adapter.make_case(shape, 0, device)
    got, ref = adapter.outputs(case), adapter.reference(case)
    res = check_outputs(got, ref, {k: adapter.threshold(k) for k in ref})
    assert res.passed, res.reason


@pytest.mark.parametrize("adapter_cls", ADAPTERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("shape", QS.tiny_cpu(), ids=lambda s: s.label)
def test_quant_tiny(adapter_cls, shape, device):
    _run(adapter_cls, shape, device)


@pytest.mark.parametrize("R,C", [(200, 300), (128, 128), (1, 5)])
def test_dual_equals_two_single_passes(R, C, device):
    """One read, the same bits as the two separate kernel.py quantizations."""
    x = (torch.randn(R, C) * 5).to(device=device, dtype=torch.bfloat16)
    rows, cols = quant_fp8_dual_1x128(x)
    r2 = quant_fp8_blockwise_1x128(x)
    c2 = quant_fp8_blockwise_1x128(x, transpose=True)
    assert torch.equal(rows.data.view(torch.uint8), r2.data.view(torch.uint8))
    assert torch.equal(cols.data.view(torch.uint8), c2.data.view(torch.uint8))
    assert torch.equal(rows.scale, r2.scale) and torch.equal(cols.scale, c2.scale)
    assert cols.data.shape == (C, R) and cols.data.is_contiguous()


def overshooting_magnitudes() -> torch.Tensor:
    """bf16 magnitudes ``a`` (at least 1e-6) for which ``a * fl(448 / a)`` rounds above 448 in
    fp32: a group whose amax is ``a`` scales that element past E4M3's largest value."""
    a = torch.arange(2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    a = a[torch.isfinite(a) & (a >= 1e-6)]
    return a[a * (448.0 / a) > 448.0]


def test_an_amax_that_scales_past_the_fp8_maximum_still_lands_on_it(device):
    """No clamp before the cast: an element scaled to 448 plus an ulp rounds to 448, never to
    NaN, and the bits match the clamping single-pass kernels."""
    a = overshooting_magnitudes()
    assert a.numel() > 1000  # the case is common, not contrived
    i = torch.arange(256)
    sign = 1.0 - 2.0 * ((i[:, None] + i[None, :]) % 2)
    x = sign * a[(i[:, None] * 7 + i[None, :]) % a.numel()]
    x = x.to(device=device, dtype=torch.bfloat16)
    rows, cols = quant_fp8_dual_1x128(x)
    refs = (quant_fp8_blockwise_1x128(x), quant_fp8_blockwise_1x128(x, transpose=True))
    for got, ref in zip((rows, cols), refs, strict=True):
        assert torch.equal(got.data.view(torch.uint8), ref.data.view(torch.uint8))
        assert got.data.float().abs().amax() == 448.0
        assert not torch.isnan(got.data.float()).any()


def test_dual_zero_groups_get_finite_scales(device):
    x = torch.zeros(130, 260, dtype=torch.bfloat16, device=device)
    x[0, 0] = 1.0
    rows, cols = quant_fp8_dual_1x128(x)
    for q in (rows, cols):
        assert torch.isfinite(q.scale).all() and (q.scale > 0).all()
        assert not torch.isnan(q.data.float()).any()


@pytest.mark.parametrize(
    "lens", [[0, 37, 1, 0, 150, 256, 3], [128, 128], [5]], ids=["ragged", "aligned", "one"]
)
def test_grouped_dual_gives_each_group_its_own_column_chunks(lens, device):
    """Rows: the dual pass's bits. Columns: group g's block is the dual pass over that group
    alone (its chunks start at its first token), the last chunk's padding zero; no chunk
    holds two groups' tokens."""
    C = 200
    x = (torch.randn(sum(lens), C) * 5).to(device=device, dtype=torch.bfloat16)
    group_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    rows, cols = quant_fp8_dual_1x128_grouped(x, group_lens)
    r2, _ = quant_fp8_dual_1x128(x)
    assert torch.equal(rows.data.view(torch.uint8), r2.data.view(torch.uint8))
    assert torch.equal(rows.scale, r2.scale)
    cap = chunk_capacity(sum(lens), len(lens))
    assert cols.data.shape == (C, cap * 128) and cols.scale.shape == (C, cap)
    start = chunk = 0
    for n in lens:
        k = -(-n // 128)
        if n:
            _, ref = quant_fp8_dual_1x128(x[start : start + n], pad_t_to=128)
            got = cols.data[:, chunk * 128 : (chunk + k) * 128]
            want = ref.data.as_strided((C, k * 128), (ref.data.stride(0), 1))
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
            assert torch.equal(cols.scale[:, chunk : chunk + k], ref.scale)
        start, chunk = start + n, chunk + k


def test_grouped_dual_rejects_what_it_cannot_read():
    x = torch.zeros(4, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="group_lens must be 1-D"):
        quant_fp8_dual_1x128_grouped(x, torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match="2-D"):
        quant_fp8_dual_1x128_grouped(x[0], torch.zeros(2, dtype=torch.int32))


def test_bytes_moved_counts_reads_and_writes():
    s = QS.Shape("s", 256, 256)
    assert QuantFp8RowwiseAdapter().bytes_moved(s)[0] == 3 * 256 * 256 + 4 * 256
    assert QuantFp8BlockwiseAdapter().bytes_moved(s)[0] == 3 * 256 * 256 + 4 * 256 * 2
    assert QuantFp8DualAdapter().bytes_moved(s)[0] == 4 * 256 * 256 + 2 * 4 * 256 * 2
    assert QuantFp8Block128Adapter().bytes_moved(s)[0] == 4 * 256 * 256 + 4 * 2 * 2


@pytest.mark.gpu
@pytest.mark.parametrize("adapter_cls", ADAPTERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("shape", QS.gpu_test(), ids=lambda s: s.label)
def test_quant_gpu(adapter_cls, shape, device):
    _run(adapter_cls, shape, device)


def test_dual_padded_transpose(device):
    """pad_t_to=128: same values, row stride a multiple of 128, zeroed padding."""
    x = torch.randn(200, 130).to(device=device, dtype=torch.bfloat16)
    _, cols = quant_fp8_dual_1x128(x)
    _, padded = quant_fp8_dual_1x128(x, pad_t_to=128)
    assert padded.data.shape == (130, 200) and padded.data.stride() == (256, 1)
    assert torch.equal(cols.data.view(torch.uint8), padded.data.view(torch.uint8))
    full = padded.data.as_strided((130, 256), (256, 1))
    assert torch.count_nonzero(full[:, 200:].view(torch.uint8)) == 0


@pytest.mark.parametrize("adapter_cls", ADAPTERS, ids=lambda c: c.__name__)
def test_the_harness_checks_and_times_each_quant_op(adapter_cls, device):
    """The harness times ``forward`` and compares what its timed calls return (fp8 values and
    scales, by the adapter's returned names) with the reference: every quant op passes, so a
    campaign's baseline can measure it."""
    shape = QS.tiny_cpu()[0]
    engine = PerfCounterEngine(samples=2, warmup=0, min_sample_ms=0.2)
    result = run_shape(adapter_cls(), shape, engine, seed=0, device=device)
    assert result.passed, result.reason
    assert result.fwd is not None and {"out", "q", "scale"} <= set(result.snr)


def test_a_timed_call_with_wrong_values_fails_the_harness(device, monkeypatch):
    """What the timed calls return is checked, not only what the check's call returned."""
    import kernel_ratchet.kernels.quant.adapter as qa

    calls = [0]

    def dual_with_flipped_signs(x):
        rows, cols = quant_fp8_dual_1x128(x)
        calls[0] += 1
        if calls[0] > 1:  # the correctness check's call is right, the timed ones are not
            rows.data.view(torch.uint8)[0] ^= 0x80
        return rows, cols

    monkeypatch.setattr(qa, "quant_fp8_dual_1x128", dual_with_flipped_signs)
    engine = PerfCounterEngine(samples=2, warmup=0, min_sample_ms=0.2)
    result = run_shape(QuantFp8DualAdapter(), Shape("t", 1, 3), engine, seed=0, device=device)
    assert not result.passed and "timed calls did not compute" in result.reason
