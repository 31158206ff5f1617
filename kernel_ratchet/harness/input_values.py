"""The values and layout a described tensor is drawn with, and the marks that change them.

By default a floating input is ``randn``, an integer one in [0, bound) and every tensor is
contiguous: the inputs a kernel is easiest on. Real inputs are not always so, and a kernel
that assumes they are can be wrong where it runs. A tensor's text in ``ratchet.yaml`` names
what its real inputs hold after ``|``, one mark per ``|``:

* ``-100``: a value an integer input also takes (an ignore_index), about one entry in eight;
* ``scale=300``: floats drawn ``randn * 300`` (pre-activations past a tanh's range);
* ``rows=0`` (``rows=-inf``, ``rows=1``): about one row in eight, a row being a slice along
  the last dimension, filled with the value (padding tokens, a fully masked row of a mask);
* ``layout=padded``: a view of a buffer whose rows are 64 elements longer (a slice of a
  fused QKV projection); ``layout=transposed``: the last two dimensions stored the other way
  (a weight kept transposed); ``layout=broadcast``: one row repeated with stride 0 along the
  leading dimensions, a 1-D tensor's one value (the incoming gradient of a ``sum``).
* ``gathers=x`` (an integer output only): the output holds indices into input ``x`` along its
  last dimension (top-k, argmax, argsort), compared by the values they select
  (:mod:`.index_outputs`), so a tie may pick either index.

A mark whose values the dtype cannot hold (``scale=1e5`` on float16, ``rows=-inf`` on e4m3,
a sentinel past int8) is a ValueError when the tensor is drawn.

Marks on a declared output describe the incoming gradient drawn for it. The marks are opt in:
a kernel whose contract excludes a case is not failed by it. Parsing needs no torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: The share of entries (or rows) drawn from a sentinel (or a ``rows=`` value).
SHARE = 0.125
#: Extra elements per row of a ``layout=padded`` buffer.
PAD = 64
LAYOUTS = ("padded", "transposed", "broadcast")
_MARK = re.compile(r"^\s*(scale|rows|layout|gathers)\s*=\s*(\S+)\s*$")
_INT = re.compile(r"^\s*-?\d+\s*$")


@dataclass(frozen=True)
class Marks:
    """The marks of one tensor (see the module docstring); the default draws plain values."""

    sentinels: tuple[int, ...] = ()
    scale: float | None = None
    rows: tuple[float, ...] = ()
    layout: str | None = None
    gathers: str | None = None


def parse_marks(items: list[str], text: str, integer: bool, floating: bool) -> Marks:
    """The marks after each ``|`` of ``text``; ValueError naming the mark and what to write."""
    sentinels: list[int] = []
    found: dict[str, list[str]] = {"scale": [], "rows": [], "layout": [], "gathers": []}
    for item in items:
        m = _MARK.match(item)
        if m:
            found[m.group(1)].append(m.group(2))
        elif _INT.match(item) and integer:
            sentinels.append(int(item))
        else:
            raise ValueError(
                f"{text!r}: after '|' comes an integer value of an integer input ('| -100'), "
                f"'scale=300', 'rows=0', 'layout=' one of {', '.join(LAYOUTS)} or, on an "
                f"integer output, 'gathers=<input>'; got {item!r}"
            )
    if any(len(found[k]) > 1 for k in ("scale", "layout", "gathers")):
        raise ValueError(f"{text!r}: give 'scale=', 'layout=' and 'gathers=' once each")
    gathers = found["gathers"][0] if found["gathers"] else None
    if gathers is not None and not integer:
        raise ValueError(
            f"{text!r}: 'gathers=' marks an integer output holding indices into an input"
        )
    scale = _scale(found["scale"], text, floating)
    layout = found["layout"][0] if found["layout"] else None
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"{text!r}: layout={layout} is not one of {', '.join(LAYOUTS)}")
    rows = tuple(_row_value(v, text, integer, floating) for v in found["rows"])
    return Marks(tuple(sentinels), scale, rows, layout, gathers)


def _scale(values: list[str], text: str, floating: bool) -> float | None:
    if not values:
        return None
    try:
        scale = float(values[0])
    except ValueError:
        scale = math.nan
    if not floating or not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"{text!r}: 'scale=' takes a positive number and a floating tensor")
    return scale


def _row_value(value: str, text: str, integer: bool, floating: bool) -> float:
    word = {"true": 1.0, "false": 0.0}.get(value.lower())
    try:
        number = word if word is not None else float(value)
    except ValueError:
        number = math.nan
    if floating:
        ok = not math.isnan(number)
    elif integer:
        ok = math.isfinite(number) and number == int(number)
    else:
        ok = number in (0.0, 1.0)
    if not ok:
        kind = "a number or ±inf" if floating else "an integer" if integer else "0, 1, true, false"
        raise ValueError(f"{text!r}: rows={value} is not {kind}")
    return number


def draw(
    size: tuple[int, ...],
    dtype: torch.dtype,
    marks: Marks,
    g: torch.Generator,
    device: str,
    high: int,
) -> torch.Tensor:
    """One tensor of ``size`` and ``dtype`` drawn from ``g`` as ``marks`` say: floats
    ``randn`` (times the scale), bools at random, integers in [0, ``high``); then the
    sentinels, the rows and the layout."""
    import torch

    _fits(marks, dtype)
    if dtype.is_floating_point:
        t = torch.randn(size, generator=g, device=device, dtype=torch.float32)
        t = (t * marks.scale if marks.scale else t).to(dtype)
    else:
        hi = 2 if dtype == torch.bool else high
        t = torch.randint(0, hi, size, generator=g, device=device).to(dtype)
    if marks.sentinels:
        t = _entries(t, marks.sentinels, g)
    if marks.rows and t.dim():
        t = _rows(t, marks.rows, g)
    return laid_out(t, marks.layout)


def _fits(marks: Marks, dtype: torch.dtype) -> None:
    """ValueError when a mark's values cannot be held by ``dtype`` (they would come out as
    Inf, saturated, wrapped around or zero, not as declared)."""
    import torch

    name = str(dtype).removeprefix("torch.")
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        if marks.scale and not info.tiny <= marks.scale <= info.max / 8:
            raise ValueError(f"scale={marks.scale:g} does not fit {name} (|x| up to {info.max:g})")
        has_inf = math.isinf(torch.tensor(math.inf).to(dtype).float().item())
        bad = [v for v in marks.rows if abs(v) > info.max and not (math.isinf(v) and has_inf)]
    else:
        if marks.scale:
            raise ValueError(f"scale= is for floating tensors; this one is {name}")
        info = torch.iinfo(dtype) if dtype != torch.bool else None
        values = [*marks.rows, *marks.sentinels]
        bad = [v for v in values if info and not info.min <= v <= info.max]
    if bad:
        raise ValueError(f"{', '.join(f'{v:g}' for v in bad)} does not fit {name}")


def _entries(t: torch.Tensor, values: tuple[float, ...], g: torch.Generator) -> torch.Tensor:
    """``t`` with about :data:`SHARE` of its entries set to one of ``values``; where ``t``
    has more entries than ``values``, each value at least once and one entry left as drawn (a
    few rows would otherwise often hold no ignore_index at all, and the path that handles it
    would go unchecked)."""
    import torch

    hit = torch.rand(t.shape, generator=g, device=t.device) < SHARE
    pick = torch.randint(0, len(values), t.shape, generator=g, device=t.device)
    if t.numel() > len(values):
        _each_once(hit.view(-1), pick.view(-1), len(values), g)
    choices = torch.tensor(values, device=t.device).to(t.dtype)
    return torch.where(hit, choices[pick], t)


def _each_once(hit: torch.Tensor, pick: torch.Tensor, count: int, g: torch.Generator) -> None:
    """Set, in place, each of the ``count`` values missing from the hit entries, at an entry
    not hit (one is kept) or else at a hit whose value repeats; leave one entry not hit
    (``hit`` has more entries than ``count``)."""
    import torch

    free = (~hit).nonzero().view(-1)
    few = 4 * count + 4  # enough free entries to choose from, in a random order
    order = (
        torch.randperm(len(free), generator=g, device=hit.device)[:few]
        if len(free) <= 4096
        else torch.randint(0, len(free), (few,), generator=g, device=hit.device).unique()
    )
    free = free[order].tolist()
    if not free:  # every entry drew a sentinel: one whose value repeats goes back
        values = pick.tolist()
        spot = next(j for j, v in enumerate(values) if values.count(v) > 1)
        hit[spot] = False
        free = [spot]
    for i in range(count):
        taken = pick[hit].tolist()
        if i in taken:
            continue
        if len(free) > 1:
            spot = free.pop()
        else:  # a hit whose value another hit holds too
            spot = next(j for j in hit.nonzero().view(-1).tolist() if taken.count(int(pick[j])) > 1)
        hit[spot], pick[spot] = True, i


def _rows(t: torch.Tensor, values: tuple[float, ...], g: torch.Generator) -> torch.Tensor:
    """``t`` with about :data:`SHARE` of its rows (slices along the last dimension; a 1-D
    tensor's entries) filled with one of ``values``, at least one row where there are two."""
    import torch

    if not t.numel():
        return t
    if t.dim() == 1:
        return _entries(t, values, g)
    lead = t.shape[:-1]
    hit = torch.rand(lead, generator=g, device=t.device) < SHARE
    if t[..., 0].numel() > 1 and not bool(hit.any()):
        hit.view(-1)[0] = True
    pick = torch.randint(0, len(values), lead, generator=g, device=t.device)
    choices = torch.tensor(values, device=t.device).to(t.dtype)[pick]
    return torch.where(hit.unsqueeze(-1), choices.unsqueeze(-1), t)


def laid_out(t: torch.Tensor, layout: str | None) -> torch.Tensor:
    """``t``'s values in ``layout``; ``t`` itself for no layout, an empty tensor, or one of
    fewer dimensions than the layout needs (two to pad or transpose, one to broadcast: a 1-D
    tensor's first value repeated, the gradient of a loss vector's sum)."""
    if layout is None or not t.numel() or t.dim() < (1 if layout == "broadcast" else 2):
        return t
    if layout == "padded":
        buf = t.new_zeros((*t.shape[:-1], t.shape[-1] + PAD))
        buf[..., : t.shape[-1]] = t
        return buf[..., : t.shape[-1]]
    if layout == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return (t[(0,) * (t.dim() - 1)] if t.dim() > 1 else t[:1]).expand(t.shape)
