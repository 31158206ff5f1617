"""Plain-PyTorch grouped GEMM: the naive truth the kernels are checked against.

Computed group by group in float32 (float64 on request) from the same inputs; it reads
``group_lens`` on the host, which is fine here and forbidden in the kernels.
"""

from __future__ import annotations

import torch


def _offsets(group_lens: torch.Tensor) -> list[int]:
    lens = [int(v) for v in group_lens.detach().cpu().tolist()]
    offs = [0]
    for n in lens:
        offs.append(offs[-1] + n)
    return offs


def grouped_gemm_ref(
    x: torch.Tensor,
    w: torch.Tensor,
    group_lens: torch.Tensor,
    dout: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict[str, torch.Tensor]:
    """Reference ``out`` [T, N] and, when ``dout`` is given, ``dx`` [T, K] and ``dw`` [G, N, K].

    All results in ``dtype`` (higher precision than the kernels' bf16/fp8 inputs).
    """
    offs = _offsets(group_lens)
    xf, wf = x.detach().to(dtype), w.detach().to(dtype)
    out = torch.zeros((x.shape[0], w.shape[1]), dtype=dtype, device=x.device)
    res: dict[str, torch.Tensor] = {"out": out}
    if dout is not None:
        df = dout.detach().to(dtype)
        res["dx"] = torch.zeros_like(xf)
        res["dw"] = torch.zeros_like(wf)
    for g in range(w.shape[0]):
        lo, hi = offs[g], offs[g + 1]
        if hi == lo:
            continue
        out[lo:hi] = xf[lo:hi] @ wf[g].t()
        if dout is not None:
            res["dx"][lo:hi] = df[lo:hi] @ wf[g]
            res["dw"][g] = df[lo:hi].t() @ xf[lo:hi]
    return res
