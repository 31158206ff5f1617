"""The norm subject's kernel (:mod:`.norm_subject`): an RMS norm's forward and backward in
PyTorch, kept apart from the adapter, whose reference a round must not reach."""

from __future__ import annotations

import torch

EPS = 1e-6


def forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """PyTorch's own RMS norm over the last dimension."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps=EPS)


def backward(
    x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """dx and dw from the saved reciprocal RMS ``rstd``, computed in fp32."""
    xhat = x.float() * rstd
    g = dy.float() * w.float()
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    dw = (dy.float() * xhat).sum(0)
    return dx.to(x.dtype), dw.to(w.dtype)
