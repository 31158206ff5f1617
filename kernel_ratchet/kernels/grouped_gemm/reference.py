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


def select_rows(t: torch.Tensor, group_lens: torch.Tensor, groups: list[int]) -> torch.Tensor:
    """Rows of ``t`` [T, ...] that belong to ``groups`` (in that order), concatenated."""
    offs = _offsets(group_lens)
    return torch.cat([t[offs[g] : offs[g + 1]] for g in groups]) if groups else t[:0]


def grouped_gemm_ref(
    x: torch.Tensor,
    w: torch.Tensor,
    group_lens: torch.Tensor,
    dout: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    dw_groups: list[int] | None = None,
) -> dict[str, torch.Tensor]:
    """Reference ``out`` [T, N] and, when ``dout`` is given, ``dx`` [T, K] and ``dw``.

    ``dw`` is [G, N, K], or [len(dw_groups), N, K] holding only those groups when
    ``dw_groups`` is given (the full fp32 weight gradient of a real MoE layer is tens of GB).
    All results in ``dtype`` (higher precision than the kernels' bf16/fp8 inputs); the weight
    is upcast one group at a time.
    """
    offs = _offsets(group_lens)
    G, N, K = w.shape
    xf = x.detach().to(dtype)
    out = torch.zeros((x.shape[0], N), dtype=dtype, device=x.device)
    res: dict[str, torch.Tensor] = {"out": out}
    wanted = list(range(G)) if dw_groups is None else list(dw_groups)
    if dout is not None:
        df = dout.detach().to(dtype)
        res["dx"] = torch.zeros_like(xf)
        res["dw"] = torch.zeros((len(wanted), N, K), dtype=dtype, device=x.device)
    for g in range(G):
        lo, hi = offs[g], offs[g + 1]
        if hi == lo:
            continue
        wg = w[g].detach().to(dtype)
        out[lo:hi] = xf[lo:hi] @ wg.t()
        if dout is not None:
            res["dx"][lo:hi] = df[lo:hi] @ wg
            for i, gg in enumerate(wanted):
                if gg == g:
                    res["dw"][i] = df[lo:hi].t() @ xf[lo:hi]
    return res
