"""Correctness metrics: SNR in dB and relative error against a higher-precision reference.

SNR = 10*log10(||ref||^2 / ||out - ref||^2), computed in float64 on the output's device (in
chunks, so a GPU output is never copied to the host: on an H200 the host copy of one
16384x57344 output takes seconds per check). A relative error r is an SNR of -20*log10(r):
1e-2 -> 40 dB, 1e-4 -> 80 dB. An exact match is +inf dB. A shape mismatch gives -inf (never
passes), and so does NaN anywhere in the output (NaN is the harness's poison for outputs never
written), or Inf where the reference is finite; where the reference itself is Inf (a fully
masked row's log-sum-exp), the output must hold the same Inf there, and the position is left
out of the sums.

An integer or bool output is measured by its entries that differ, 10*log10(entries / entries
that differ) dB (+inf when all are equal): as values, among indices near 50,000 an index off by
one would read 89 dB. Its bar is +inf unless the op allows a share. An output whose bar is
infinite must be exact (the values a ``gathers=`` index output selects,
:mod:`.index_outputs`).

A whole-tensor SNR averages: one row never written among 16384 costs 0.3 dB. So
:func:`check_outputs` also judges each slice (one index of one dimension: a row, a column) on
its own, see :func:`worst_slice`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

#: Elements per float64 chunk of the SNR sums (512 MB per temporary).
CHUNK = 1 << 26
#: A slice of an output must reach the output's threshold less this many dB. An honest
#: kernel's error follows the signal (bf16 rounding, fp32 accumulation: each slice within a few
#: dB of the whole, measured against the typical slice's energy, :func:`worst_slice`); a row
#: or column never written, written twice or in the wrong place reads near 0 dB.
SLICE_MARGIN_DB = 10.0
#: The fewest elements a slice holds (too few errors to average below): a dimension whose
#: single index holds fewer is judged by runs of consecutive indices.
SLICE_MIN = 16


@dataclass(frozen=True)
class Comparison:
    """The SNR of one output and, when asked, its worst slice (:func:`worst_slice`): (dim,
    start, stop, dB), or None where no dimension has two slices."""

    snr: float
    worst: tuple[int, int, int, float] | None = None


def snr_db(out: torch.Tensor, ref: torch.Tensor) -> float:
    """SNR in dB of ``out`` against ``ref`` (both any float dtype, compared in float64)."""
    return compare(out, ref, slices=False).snr


def compare(out: torch.Tensor, ref: torch.Tensor, *, slices: bool = True) -> Comparison:
    """The SNR of ``out`` against ``ref`` and, with ``slices``, the worst slice's
    (:func:`worst_slice`'s measure)."""
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        return Comparison(-math.inf)  # tensor subclasses and non-tensors never pass
    if out.shape != ref.shape:
        return Comparison(-math.inf)
    o, r = out.detach(), ref.detach().to(out.device)
    if not r.is_floating_point():
        return Comparison(_agreement(o, r))
    if o.dim() == 0:
        o, r = o.reshape(1), r.reshape(1)
    dims = _slice_dims(o.shape) if slices else {}
    sums = _Sums(o, dims)
    rows = max(1, CHUNK // max(1, o[0].numel())) if o.shape[0] else 1
    for i in range(0, o.shape[0], rows):
        sums.add(i, o[i : i + rows], r[i : i + rows])
    if not bool(sums.ok):
        return Comparison(-math.inf)
    noise, signal = sums.noise.sum().item(), sums.signal.sum().item()
    if noise == 0.0:
        return Comparison(math.inf)
    if signal == 0.0:
        return Comparison(-math.inf)
    return Comparison(10.0 * math.log10(signal / noise), sums.worst())


def _agreement(o: torch.Tensor, r: torch.Tensor) -> float:
    """The measure of an integer or bool output: 10*log10(entries / entries that differ), +inf
    where every entry equals the reference's (20 dB: one entry in a hundred differs)."""
    wrong = int(_unequal(o, r).sum())
    return math.inf if wrong == 0 else 10.0 * math.log10(max(1, r.numel()) / wrong)


def _unequal(o: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    if o.is_floating_point() or r.is_floating_point():
        o, r = o.to(torch.float64), r.to(torch.float64)  # NaN differs from everything
    return o != r


def worst_slice(out: torch.Tensor, ref: torch.Tensor) -> tuple[int, int, int, float] | None:
    """(dim, start, stop, dB) of the slice of ``out`` farthest from ``ref``. A slice is the
    indices ``start:stop`` of one dimension: one index where that holds :data:`SLICE_MIN`
    elements or more, else as many consecutive indices as make that many (the rows of a
    ``[M, 8]`` output by twos, a 1-D output by sixteens). Its SNR's signal is the larger of its
    own energy and the typical slice energy of that dimension, so a slice the reference leaves
    near zero is held to the tensor's scale, not to its own. Typical is the energy-weighted
    mean, sum(s²)/sum(s): the mean where slices are alike, the energy of the slices that hold
    it where it is sparse (a softmax's gradient over a 50k vocabulary, whose near-empty
    columns keep the rounding of a near-one-hot row). None where no dimension has two
    slices."""
    return compare(out, ref).worst


#: Indices of dim 0 summed one by one at most (the sums live on the output's device).
_MAX_ROWS = 1 << 26


def _slice_dims(shape: torch.Size) -> dict[int, int]:
    """Dimension -> indices per slice, for each dimension with two slices or more."""
    numel, out = math.prod(shape), {}
    for d, n in enumerate(shape):
        per = numel // n if n else 0
        k = 1 if per >= SLICE_MIN else -(-SLICE_MIN // max(per, 1))
        if per and -(-n // k) >= 2 and (d or n <= _MAX_ROWS):
            out[d] = k
    return out


class _Sums:
    """float64 sums of error² and signal² per index of dim 0 (the chunks run along it) and
    per index of each slice dimension, with the non-finite verdict, all kept on the device."""

    def __init__(self, o: torch.Tensor, dims: dict[int, int]) -> None:
        z = {"dtype": torch.float64, "device": o.device}
        self.rows = 0 in dims  # sums per index of dim 0, else one sum
        n = o.shape[0] if self.rows else 1
        self.noise, self.signal = torch.zeros(n, **z), torch.zeros(n, **z)
        self.dims = dims
        self.per = {d: (torch.zeros(o.shape[d], **z), torch.zeros(o.shape[d], **z)) for d in dims}
        self.ok = torch.ones((), dtype=torch.bool, device=o.device)

    def add(self, i: int, oc: torch.Tensor, rc: torch.Tensor) -> None:
        oc, rc = oc.to(torch.float64), rc.to(torch.float64)
        finite = torch.isfinite(rc)
        self.ok &= torch.where(finite, torch.isfinite(oc), oc == rc).all()
        e2 = torch.where(finite, oc - rc, 0.0).square()
        s2 = torch.where(finite, rc, 0.0).square()
        if self.rows:
            self.noise[i : i + oc.shape[0]] = _by_index(e2, 0)
            self.signal[i : i + oc.shape[0]] = _by_index(s2, 0)
        else:
            self.noise += e2.sum()
            self.signal += s2.sum()
        for d in self.dims:
            if d:
                self.per[d][0].add_(_by_index(e2, d))
                self.per[d][1].add_(_by_index(s2, d))

    def worst(self) -> tuple[int, int, int, float] | None:
        found = None
        for d, k in self.dims.items():
            e2, s2 = (self.noise, self.signal) if d == 0 else self.per[d]
            n = e2.numel()
            e2, s2 = _grouped(e2, k), _grouped(s2, k)
            floor = torch.clamp(s2, min=(s2.square().sum() / s2.sum()).item())
            db = 10.0 * torch.log10(floor / e2)  # inf where a slice is exact
            i = int(torch.argmin(db))
            if found is None or db[i].item() < found[3]:
                found = (d, i * k, min(n, (i + 1) * k), db[i].item())
        return found


def _by_index(t: torch.Tensor, d: int) -> torch.Tensor:
    """The sum of ``t`` over every dimension but ``d``."""
    others = tuple(k for k in range(t.dim()) if k != d)
    return t.sum(dim=others) if others else t


def _grouped(v: torch.Tensor, k: int) -> torch.Tensor:
    """``v`` summed over runs of ``k`` consecutive entries (the last run may be shorter)."""
    if k == 1:
        return v
    return torch.nn.functional.pad(v, (0, -v.numel() % k)).view(-1, k).sum(1)


def slice_name(name: str, ndim: int, dim: int, start: int, stop: int) -> str:
    """``y[17, :]`` (``y[16368:16384]``): the indices ``start:stop`` of dimension ``dim`` of
    output ``name``."""
    at = str(start) if stop == start + 1 else f"{start}:{stop}"
    return f"{name}[{', '.join(at if k == dim else ':' for k in range(ndim))}]"


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (inf on NaN or shape mismatch)."""
    s = snr_db(out, ref)
    return 0.0 if s == math.inf else 10.0 ** (-s / 20.0)


@dataclass(frozen=True)
class CheckResult:
    """Per-output SNR and the verdict against the thresholds."""

    snr: dict[str, float]
    passed: bool
    reason: str


def check_outputs(
    got: Mapping[str, torch.Tensor],
    ref: Mapping[str, torch.Tensor],
    thresholds: Mapping[str, float],
) -> CheckResult:
    """Compare each named output with its reference; every name in ``ref`` must be present."""
    snr: dict[str, float] = {}
    failures = []
    for name, r in ref.items():
        if name not in got:
            snr[name] = -math.inf
            failures.append(f"{name}: missing from the candidate's outputs")
            continue
        g, bar = got[name], thresholds[name]
        c = compare(g, r) if isinstance(r, torch.Tensor) else Comparison(-math.inf)
        snr[name] = c.snr
        if isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor) and g.shape != r.shape:
            failures.append(
                f"{name}: shape {list(g.shape)} against the reference's {list(r.shape)}"
            )
        elif not (c.snr >= bar) and type(g) is torch.Tensor and _counted(r, bar):
            failures.append(_differs(name, g, r, c.snr, bar))
        elif not (c.snr >= bar):
            why = _infinite_why(name, g, r) if c.snr == -math.inf else ""
            failures.append(f"{name}: SNR {c.snr:.2f} dB < {bar:.1f} dB{why}")
        elif c.worst and math.isfinite(bar) and not (c.worst[3] >= bar - SLICE_MARGIN_DB):
            d, start, stop, db = c.worst
            failures.append(
                f"{name}: {slice_name(name, r.dim(), d, start, stop)} at SNR {db:.2f} dB < "
                f"{bar - SLICE_MARGIN_DB:.1f} dB (the whole output: {c.snr:.2f} dB; each row "
                f"and column must reach its threshold less {SLICE_MARGIN_DB:.0f} dB: one that "
                "is unwritten or misplaced does not)"
            )
    return CheckResult(snr, not failures, "; ".join(failures) or "all outputs within threshold")


def _counted(ref: torch.Tensor, bar: float) -> bool:
    """Whether an output is judged by the entries that differ: an integer or bool one (an
    index off by one reads 89 dB of SNR among indices near 50,000), or one that must be exact
    (an infinite bar: the values a ``gathers=`` output selects)."""
    return not ref.is_floating_point() or bar == math.inf


def _differs(name: str, out: torch.Tensor, ref: torch.Tensor, db: float, bar: float) -> str:
    """How an output judged by its differing entries fails: the count, the first place."""
    wrong = _unequal(out.detach(), ref.detach().to(out.device))
    n, at = int(wrong.sum()), [int(i) for i in wrong.nonzero()[0]] if wrong.dim() else []
    where = f"{name}[{', '.join(map(str, at))}]" if at else name
    got, want = (t.detach()[tuple(at)].item() if at else t.item() for t in (out, ref))
    head = (
        f"{name}: {n} of {ref.numel()} values differ from the reference's, first {where}: "
        f"{got} against {want}"
    )
    if ref.is_floating_point():
        return (
            f"{head} (its bar is infinite: every value must equal the reference's, as for the "
            "values a '| gathers=' output's indices select, where a tie may pick either index, "
            "or an output declared with tolerance .inf)"
        )
    allowed = "none" if bar == math.inf else f"one in {10 ** (bar / 10):.0f}"
    return (
        f"{head}; {db:.1f} dB < {bar:g} dB, {allowed} may differ (an integer or bool output "
        f"is measured as 10*log10(entries / entries that differ); where ties let two indices "
        f"be right, mark the output '| gathers=<input>'; where rounding may flip a few, allow "
        f"a share: tolerance: {{{name}: 20}} lets one in 100 differ)"
    )


def assert_close(
    got: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor], min_snr_db: float
) -> None:
    """Test helper: fail with the SNR and relative error of every tensor, not just the first
    (one judged by its differing entries, :func:`_counted`, with where they are)."""
    lines, ok = [], True
    for name, r in ref.items():
        s = snr_db(got[name], r)
        ok &= s >= min_snr_db
        lines.append(f"  {name}: snr={s:.2f} dB rel_err={rel_err(got[name], r):.3e}")
        if s < min_snr_db and _counted(r, min_snr_db) and got[name].shape == r.shape:
            lines.append(f"    {_differs(name, got[name], r, s, min_snr_db)}")
    if not ok:
        raise AssertionError(f"outputs below {min_snr_db} dB:\n" + "\n".join(lines))


_NAN_REFERENCE = (
    "; NaN never passes (it marks outputs never written): make the reference return a number "
    "there, and its gradient too"
)


def _infinite_why(name: str, out: torch.Tensor, ref: torch.Tensor) -> str:
    """Why an output read -inf dB, where a value says it ("" where none does): NaN in the
    reference or the output, an Inf the reference does not have, an all-zero reference.
    Each with its count and its first position."""
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        return ""
    o, r = out.detach(), ref.detach().to(out.device)
    if o.dtype.itemsize == 1 and o.is_floating_point():
        o = o.to(torch.float16)  # fp8 has no isnan
    finite = torch.isfinite(r)
    nan_ref = torch.isnan(r)
    found = [
        (nan_ref, "the reference holds NaN", _NAN_REFERENCE),
        (torch.isnan(o) & ~nan_ref, "the output holds NaN", ""),
        (
            ~finite & ~nan_ref & (o.to(r.dtype) != r),
            "the output differs from the reference's Inf",
            "",
        ),
        (finite & torch.isinf(o), "the output holds Inf where the reference is finite", ""),
    ]
    for mask, what, then in found:
        n = int(mask.sum())
        if n:
            first = [int(i) for i in mask.nonzero()[0]] if mask.dim() else []
            at = f"{name}[{', '.join(map(str, first))}]" if first else name
            return f" ({what} at {n} position{'s' * (n > 1)}, first {at}{then})"
    if not bool(r.any()):
        return " (the reference is all zero and the output is not)"
    return ""
