"""Correctness metrics: SNR in dB and relative error against a higher-precision reference.

SNR = 10*log10(||ref||^2 / ||out - ref||^2), computed in float64 on the output's device (in
chunks, so a GPU output is never copied to the host: on an H200 the host copy of one
16384x57344 output takes seconds per check). A relative error r is an SNR of -20*log10(r):
1e-2 -> 40 dB, 1e-4 -> 80 dB. An exact match is +inf dB. NaN or Inf anywhere in the output, or a
shape mismatch, gives -inf (never passes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

#: Elements per float64 chunk of the SNR sums (512 MB per temporary).
CHUNK = 1 << 26


def snr_db(out: torch.Tensor, ref: torch.Tensor) -> float:
    """SNR in dB of ``out`` against ``ref`` (both any float dtype, compared in float64)."""
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        return -math.inf  # tensor subclasses and non-tensors never pass
    if out.shape != ref.shape:
        return -math.inf
    o = out.detach().reshape(-1)
    r = ref.detach().to(o.device).reshape(-1)
    noise = torch.zeros((), dtype=torch.float64, device=o.device)
    signal = torch.zeros_like(noise)
    finite = torch.ones((), dtype=torch.bool, device=o.device)
    for i in range(0, o.numel(), CHUNK):
        oc, rc = o[i : i + CHUNK].to(torch.float64), r[i : i + CHUNK].to(torch.float64)
        finite &= torch.isfinite(oc).all()
        noise += torch.sum((oc - rc) ** 2)
        signal += torch.sum(rc**2)
    if not bool(finite):
        return -math.inf
    noise, signal = noise.item(), signal.item()
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


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
        s = snr_db(got[name], r)
        snr[name] = s
        g = got[name]
        if isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor) and g.shape != r.shape:
            failures.append(
                f"{name}: shape {list(g.shape)} against the reference's {list(r.shape)}"
            )
        elif not (s >= thresholds[name]):
            failures.append(f"{name}: SNR {s:.2f} dB < {thresholds[name]:.1f} dB")
    return CheckResult(snr, not failures, "; ".join(failures) or "all outputs within threshold")


def assert_close(
    got: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor], min_snr_db: float
) -> None:
    """Test helper: fail with the SNR and relative error of every tensor, not just the first."""
    lines, ok = [], True
    for name, r in ref.items():
        s = snr_db(got[name], r)
        ok &= s >= min_snr_db
        lines.append(f"  {name}: snr={s:.2f} dB rel_err={rel_err(got[name], r):.3e}")
    if not ok:
        raise AssertionError(f"outputs below {min_snr_db} dB:\n" + "\n".join(lines))
