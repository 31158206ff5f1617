"""Integer outputs that index an input (``| gathers=x``): compared by the values they select.

A top-k, argmax or argsort over bf16 values meets ties: two indices hold the same value, and an
honest kernel may return either. An output declared ``"[M, k] int64 | gathers=x"`` is compared
by ``x.gather(-1, idx)``, the values its indices select from the case's own input (never an
upcast copy), and those must equal the reference's exactly (the adapter's threshold for it is
infinite). Before any value is compared, an index outside ``x``'s last dimension, or one
repeated within a row of a top-k or argsort (an output of ``x``'s rank), makes the output
wrong: a repeated index can select a tied value twice.

An integer output without the mark (counts, token ids, a histogram) must equal the
reference's exactly (:func:`kernel_ratchet.harness.correctness.check_outputs`).
"""

from __future__ import annotations

import torch

from kernel_ratchet.errors import ProfileError


class WrongOutput(Exception):  # noqa: N818 -- named for the outcome, like CheatDetected
    """An output that is wrong before it is compared (indices out of range, repeated)."""


def gathered(
    name: str, idx: torch.Tensor, src: str, x: torch.Tensor, reference: bool
) -> torch.Tensor:
    """The values of ``x`` (input ``src``) that output ``name``'s indices select along ``x``'s
    last dimension; WrongOutput for a candidate's output, ProfileError for the reference's,
    where the indices cannot be right."""
    i, v = idx.detach(), x.detach()
    squeeze = i.dim() == v.dim() - 1
    if squeeze:
        i = i.unsqueeze(-1)
    who = f"the reference's {name}" if reference else name
    why = _invalid(i, v, src)
    if why is not None:
        msg = f"{who} {why}"
        if reference:
            raise ProfileError(
                f"{msg}; 'gathers={src}' on an output says it holds indices into {src}'s last "
                "dimension (top-k, argmax, argsort): fix the reference or remove the mark"
            )
        raise WrongOutput(msg)
    out = v.gather(-1, i.long())
    return out.squeeze(-1) if squeeze else out


def _invalid(i: torch.Tensor, v: torch.Tensor, src: str) -> str | None:
    """Why indices ``i`` (of ``v``'s rank) cannot select along ``v``'s last dimension, or
    None."""
    if i.is_floating_point() or i.dtype == torch.bool:
        return f"came back {str(i.dtype).removeprefix('torch.')}; indices are integers"
    if i.dim() != v.dim() or i.shape[:-1] != v.shape[:-1]:
        return f"has shape {list(i.shape)}, which cannot index {src} {list(v.shape)} by rows"
    n = v.shape[-1]
    bad = (i < 0) | (i >= n)
    if bool(bad.any()):
        at = [int(k) for k in bad.nonzero()[0]]
        return (
            f"holds {int(bad.sum())} index(es) outside [0, {n}), first {int(i[tuple(at)])} at "
            f"position {at}"
        )
    if i.shape[-1] > 1:
        s = i.sort(-1).values
        rep = s[..., 1:] == s[..., :-1]
        if bool(rep.any()):
            at = [int(k) for k in rep.nonzero()[0]]
            return (
                f"repeats index {int(s[tuple(at)])} within row {at[:-1]}: a row of a top-k or "
                "argsort holds distinct indices"
            )
    return None
