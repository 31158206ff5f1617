"""FP8 quantization ops: dual (dual.py) and the rowwise/blockwise adapters that
wrap launch.py, against the plain-PyTorch references. Interpreter on the CPU, real sizes on GPU.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.kernels.quant import shapes as QS
from kernel_ratchet.kernels.quant.adapter import (
    QuantFp8BlockwiseAdapter,
    QuantFp8DualAdapter,
    QuantFp8RowwiseAdapter,
)
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.launch import quant_fp8_blockwise_1x128

ADAPTERS = [QuantFp8RowwiseAdapter, QuantFp8BlockwiseAdapter, QuantFp8DualAdapter]


def _run(adapter_cls, shape, device):
    adapter = adapter_cls()
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


def test_dual_zero_groups_get_finite_scales(device):
    x = torch.zeros(130, 260, dtype=torch.bfloat16, device=device)
    x[0, 0] = 1.0
    rows, cols = quant_fp8_dual_1x128(x)
    for q in (rows, cols):
        assert torch.isfinite(q.scale).all() and (q.scale > 0).all()
        assert not torch.isnan(q.data.float()).any()


def test_bytes_moved_counts_reads_and_writes():
    s = QS.Shape("s", 256, 256)
    assert QuantFp8RowwiseAdapter().bytes_moved(s)[0] == 3 * 256 * 256 + 4 * 256
    assert QuantFp8BlockwiseAdapter().bytes_moved(s)[0] == 3 * 256 * 256 + 4 * 256 * 2
    assert QuantFp8DualAdapter().bytes_moved(s)[0] == 4 * 256 * 256 + 2 * 4 * 256 * 2


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
