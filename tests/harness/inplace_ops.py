"""Ops that write their results into their inputs, as Triton kernels do (through the pointer,
so autograd's version counters do not move): a SwiGLU whose backward writes da and db into the
saved a and b (Liger-Kernel's layout), and variants that cheat."""

from __future__ import annotations

import torch
import torch.nn.functional as F

CALLS = {"backward": 0}


def _grads(a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a32, b32, dc32 = a.float(), b.float(), dc.float()
    sig = torch.sigmoid(a32)
    silu = a32 * sig
    return (dc32 * b32 * sig * (1 + a32 * (1 - sig))).to(a.dtype), (dc32 * silu).to(b.dtype)


class _SwiGLU(torch.autograd.Function):
    writes = staticmethod(lambda: True)

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.view(-1, a.shape[-1]), b.view(-1, b.shape[-1])  # views made in no_grad mode
        ctx.save_for_backward(a, b)
        return (F.silu(a.float()) * b.float()).to(a.dtype)

    @classmethod
    def backward(cls, ctx, dc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = ctx.saved_tensors
        CALLS["backward"] += 1
        if cls.writes():
            da, db = _grads(a, b, dc)
            a.data.copy_(da)  # in place, as a kernel's store: no version bump
            b.data.copy_(db)
        return a, b


class _StopsWriting(_SwiGLU):
    """Right for the calls a correctness check makes, then leaves the inputs as they are."""

    writes = staticmethod(lambda: CALLS["backward"] <= 3)


def swiglu_inplace(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _SwiGLU.apply(a, b)


def swiglu_stops_writing(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _StopsWriting.apply(a, b)


def swiglu_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.silu(a) * b


GAIN = 1.0e6  # fp32 overflows after a handful of chained backward calls
PEAK = {"dy": 0.0}  # the largest incoming gradient a backward call was handed


class _ScaleIntoDy(torch.autograd.Function):
    """y = x * w * GAIN; the backward writes dx into the incoming gradient (Liger-Kernel's
    RMSNorm layout, dX into dY). Calls chained on their own results grow by GAIN each."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x * w * GAIN

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        PEAK["dy"] = max(PEAK["dy"], float(dy.abs().max()))  # what a call was handed
        dw = (dy * x * GAIN).sum(0)
        dy.data.mul_(w * GAIN)  # dx, stored in dy as a kernel would
        return dy, dw


def scale_into_dy(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _ScaleIntoDy.apply(x, w)


def scale_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w * GAIN
