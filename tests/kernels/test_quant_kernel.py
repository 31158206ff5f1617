"""FP8 quantization kernels against plain PyTorch (scales exactly, values bit-exactly)."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.quant import launch as ql
from kernel_ratchet.kernels.quant.launch import (
    FP8_MAX,
    dequant_fp8,
    quant_fp8_block_128x128,
    quant_fp8_blockwise_1x128,
    quant_fp8_rowwise,
    quant_fp8_tensorwise,
)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
SHAPES = {"200x300": (200, 300), "128x256": (128, 256), "1x130": (1, 130)}


def _ref_quant(x: torch.Tensor, scale_full: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch's own fp32 -> fp8 cast (round to nearest even) with a broadcast scale."""
    fmax = FP8_MAX[dtype]
    return (x.float() / scale_full).clamp(-fmax, fmax).to(dtype)


def _assert_fp8_match(got: torch.Tensor, ref: torch.Tensor) -> None:
    """Equal up to one fp8 step on rare ties: the kernel multiplies by fp8_max/amax where the
    reference divides by the scale, which can round a tie the other way."""
    g, r = got.float().cpu(), ref.float().cpu()
    diff = (g - r).abs()
    assert (diff > 0).float().mean() < 1e-2, f"{int((diff > 0).sum())} elements differ"
    assert bool((diff <= 0.25 * r.abs() + 2.0**-6).all()), "a value is off by more than a step"


def _expand(scale: torch.Tensor, rows: int, cols: int, gr: int, gc: int) -> torch.Tensor:
    return scale.repeat_interleave(gr, 0)[:rows].repeat_interleave(gc, 1)[:, :cols]


def _amax_groups(x: torch.Tensor, gr: int, gc: int) -> torch.Tensor:
    r, c = x.shape
    pr, pc = -r % gr, -c % gc
    xp = torch.nn.functional.pad(x.float().abs(), (0, pc, 0, pr))
    return xp.view((r + pr) // gr, gr, (c + pc) // gc, gc).amax(dim=(1, 3)).clamp(min=1e-12)


#: Input dtypes: an FP8 Linear takes fp32 operands too (fp32 master weights, say).
INPUTS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@pytest.fixture(
    params=[(s, d) for s in SHAPES for d in INPUTS],
    ids=[f"{s}-{d}" for s in SHAPES for d in INPUTS],
)
def x(request, device) -> torch.Tensor:
    """An input of each shape and dtype; a copy's transposed tile is cast in another layout
    than the straight one's, so both copies are compared bit for bit for every dtype."""
    torch.manual_seed(0)
    (r, c), dtype = SHAPES[request.param[0]], INPUTS[request.param[1]]
    return (torch.randn(r, c, device=device) * 3).to(dtype)


@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_tensorwise(x, dtype):
    q = quant_fp8_tensorwise(x, dtype, with_transpose=True)
    scale = x.float().abs().max() / FP8_MAX[dtype]
    torch.testing.assert_close(q.scale.cpu(), scale.cpu())
    _assert_fp8_match(q.data, _ref_quant(x, q.scale, dtype))
    assert torch.equal(q.data_t.view(torch.uint8), q.data.t().view(torch.uint8))


@pytest.mark.parametrize("transpose", [False, True], ids=["rows", "cols"])
def test_rowwise(x, transpose):
    xx = x.t() if transpose else x
    q = quant_fp8_rowwise(x, E4M3, transpose=transpose)
    assert q.data.shape == xx.shape and q.data.is_contiguous()
    torch.testing.assert_close(q.scale, xx.float().abs().amax(1).clamp(min=1e-12) / 448.0)
    _assert_fp8_match(q.data, _ref_quant(xx, q.scale[:, None], E4M3))


@pytest.mark.parametrize("transpose", [False, True], ids=["1x128", "128x1"])
def test_blockwise_1x128(x, transpose):
    xx = x.t() if transpose else x
    q = quant_fp8_blockwise_1x128(x, E4M3, transpose=transpose)
    assert q.data.shape == xx.shape and q.data.is_contiguous()
    assert q.scale.stride(0) == 1, "scales must be stored M-major for the GEMM"
    torch.testing.assert_close(q.scale, _amax_groups(xx, 1, 128) / 448.0)
    full = _expand(q.scale, *xx.shape, 1, 128)
    _assert_fp8_match(q.data, _ref_quant(xx, full, E4M3))


def test_block_128x128(x):
    q = quant_fp8_block_128x128(x, E4M3, with_transpose=True)
    torch.testing.assert_close(q.scale, _amax_groups(x, 128, 128) / 448.0)
    full = _expand(q.scale, *x.shape, 128, 128)
    _assert_fp8_match(q.data, _ref_quant(x, full, E4M3))
    assert torch.equal(q.data_t.view(torch.uint8), q.data.t().view(torch.uint8))
    back = dequant_fp8(q.data_t, q.scale_t, (128, 128))
    torch.testing.assert_close(back, dequant_fp8(q, group=(128, 128)).t())


@pytest.mark.parametrize(
    "fn,kw",
    [
        (ql.quant_fp8_tensorwise, {"with_transpose": True}),
        (ql.quant_fp8_rowwise, {"transpose": True}),
        (ql.quant_fp8_blockwise_1x128, {}),
        (ql.quant_fp8_blockwise_1x128, {"transpose": True}),
        (ql.quant_fp8_block_128x128, {"with_transpose": True}),
    ],
    ids=["tensorwise", "rowwise-t", "1x128", "1x128-t", "128x128"],
)
def test_aligned_rows_hold_the_same_values(fn, kw, device):
    """``align=16``: same values and scales, row strides rounded up to 16 elements."""
    x = torch.randn(37, 130, device=device).to(torch.bfloat16)
    plain, aligned = fn(x, **kw), fn(x, **kw, align=16)
    for p, a in zip(plain, aligned, strict=True):
        if p is None or p.dtype == torch.float32:
            assert p is None or torch.equal(p, a)
            continue
        assert a.shape == p.shape and a.stride(0) % 16 == 0 and a.stride(1) == 1
        assert torch.equal(p.float(), a.float())
