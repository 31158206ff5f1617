"""What a timed call returned: its tensors, read through tuples, lists and mappings; NaN
poison written into them before the next call; the check that the call rewrote them.

Part of the anti-cheat checks (:mod:`.anticheat`, which re-exports these): every function here
raises :class:`~kernel_ratchet.harness.cheat.CheatDetected` with one readable sentence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from kernel_ratchet.harness.cheat import CheatDetected


def _flatten_outputs(
    out: Any, prefix: str, what: str, result: list[tuple[str, torch.Tensor]]
) -> None:
    """Append ``out``'s tensors to ``result``, each named by its path below ``prefix``."""
    if isinstance(out, Mapping):
        items = [(str(k), v) for k, v in out.items()]
    elif isinstance(out, (tuple, list)):
        fields = getattr(out, "_fields", None)  # a named tuple: name its entries
        items = [(str(fields[i] if fields else i), v) for i, v in enumerate(out)]
    else:  # a bare value (only at the top: nested ones are checked below)
        items = [("0", out)]
    for key, v in items:
        name = f"{prefix}.{key}" if prefix else key
        if v is None:
            continue
        if isinstance(v, (Mapping, tuple, list)):
            _flatten_outputs(v, name, what, result)
            continue
        if type(v) is not torch.Tensor:
            kind = "tensor subclass" if isinstance(v, torch.Tensor) else "non-tensor value"
            raise CheatDetected(
                f"{what} returned a {kind} ({type(v).__module__}.{type(v).__qualname__}) for "
                f"{name!r}; outputs must be plain torch.Tensor (a lazy or wrapped result could "
                "defer the work past the timer)"
            )
        refuse_shadowed([(name, v)], f"{what} output")
        result.append((name, torch.Tensor.detach(v)))  # same storage: poison writes its .data


def shadowed(t: torch.Tensor) -> list[str]:
    """The names a tensor's own ``__dict__`` holds that hide an attribute of
    ``torch.Tensor`` (``t.detach = ...``, ``t.copy_ = ...``): every call through them runs
    the candidate's code, after the clock stopped or in place of the checker's."""
    own = vars(t) if hasattr(t, "__dict__") else {}
    return sorted(k for k in own if hasattr(torch.Tensor, k))


def refuse_shadowed(ts: list[tuple[str, torch.Tensor]], what: str) -> None:
    """Raise CheatDetected naming every tensor of ``ts`` whose own attributes hide
    ``torch.Tensor``'s (see :func:`shadowed`)."""
    found = [f"{name} ({', '.join(names)})" for name, t in ts if (names := shadowed(t))]
    if found:
        raise CheatDetected(
            f"{what} tensor(s) {'; '.join(found)} carry attributes of their own that hide "
            "torch.Tensor's methods: a call through them (the harness's detach, copy_ or "
            "the reference's double) runs the candidate's code instead"
        )


def output_tensors(out: Any, what: str) -> list[tuple[str, torch.Tensor]]:
    """Flatten a forward/backward return value into named tensors (detached aliases of the
    returned ones); reject anything else.

    Accepts a plain tensor, or tuples, lists and mappings of them, nested (a named tuple is a
    tuple; ``None`` entries are skipped, e.g. an absent gradient). A nested tensor is named by
    its path, ``"1.scale"`` or ``"0.2"``. Raises CheatDetected for a tensor subclass, a lazy
    wrapper or a non-tensor value.
    """
    result: list[tuple[str, torch.Tensor]] = []
    _flatten_outputs(out, "", what, result)
    if not result:
        raise CheatDetected(f"{what} returned no tensor at all ({type(out).__name__})")
    return result


def check_output_types(outputs: Mapping[str, Any]) -> None:
    """``adapter.outputs`` must be a dict of plain tensors."""
    if not isinstance(outputs, Mapping):
        raise CheatDetected(
            f"outputs() returned {type(outputs).__name__}, not a dict of named tensors"
        )
    output_tensors(dict(outputs), "outputs()")


def poison(ts: list[tuple[str, torch.Tensor]]) -> None:
    """NaN-fill float outputs (max value for integer ones) so stale results show."""
    with torch.no_grad():
        for _, out in ts:
            t = out.data  # autograd does not count this as an in-place write of the output
            if t.is_floating_point() and t.element_size() >= 1:
                try:
                    t.fill_(math.nan)
                except RuntimeError:  # dtypes without NaN (e.g. some fp8 variants)
                    t.view(torch.uint8).fill_(0xFF)
            elif t.dtype == torch.bool:
                t.fill_(True)
            elif not t.is_complex():
                t.view(torch.uint8).fill_(0xFF) if t.is_contiguous() else t.fill_(-1)


def nonfinite(ts: list[tuple[str, torch.Tensor]], nan_only: bool = False) -> list[str]:
    """Names of floating tensors holding NaN or Inf (``nan_only``: NaN, the poison's value;
    an Inf can be a right answer where the reference has it)."""
    ok = _not_nan if nan_only else torch.isfinite
    return [n for n, t in ts if t.is_floating_point() and not _all(t, ok)]


def _not_nan(t: torch.Tensor) -> torch.Tensor:
    return ~torch.isnan(t)


_FP8_CHUNK = 1 << 24  # elements read through fp16 at a time: 32 MiB beside the output


def _all(t: torch.Tensor, ok: Callable[[torch.Tensor], torch.Tensor]) -> bool:
    if t.element_size() != 1:
        return bool(ok(t).all())
    # fp8 has no isfinite kernel; fp16 holds every fp8 value exactly. Read in chunks, so a
    # large output does not need twice its size again in fp16.
    flat = t.reshape(-1)
    return all(bool(ok(c.to(torch.float16)).all()) for c in flat.split(_FP8_CHUNK))


def require_rewritten(ts: list[tuple[str, torch.Tensor]], what: str, index: int) -> None:
    """Raise CheatDetected when outputs of timed sample ``index``, poisoned before it, still
    hold NaN: the timed calls returned them without computing them."""
    bad = nonfinite(ts, nan_only=True)
    if bad:
        raise CheatDetected(
            f"{what} output(s) {', '.join(bad)} of timed sample {index} still hold the NaN "
            "poison (or NaN): a cached tensor was returned or only part was written"
        )
