"""The timing and checking shared by the GEMM config sweeps (:mod:`.tune`, :mod:`.tune_odd`).

``DEVICE``: where the sweeps run (``"cpu"`` in ``--smoke``, the Triton interpreter).
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable

import triton
import triton.testing

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm.configs import GemmConfig, bucket_for

DEVICE = "cuda"


def bench(fn) -> float:
    """Median milliseconds of ``fn`` (``do_bench``, L2 flushed); one wall-clock call on the CPU."""
    if DEVICE != "cuda":  # --smoke on the CPU interpreter: one call, wall clock
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def run_cases(
    M: int,
    N: int,
    K: int,
    cases: list,
    vend: dict[str, float],
    t0: float,
    budget_s: float,
    results: list[dict],
) -> None:
    """The vendor's times ``vend`` (ms by GEMM) as results, then check (SNR against ``ref``)
    and time each ``(what, config, fn, ref)`` case of one shape; a config that fails is a
    result too. ``config`` None is the shipped bucket's choice."""
    for what, ms in vend.items():
        row = {"shape": [M, N, K], "what": what, "cfg": "vendor", "ms": ms}
        results.append({**row, "tflops": tflops(M, N, K, ms), "snr": None})
    for what, cfg, fn, r in cases:
        if time.time() - t0 > budget_s:
            print("budget reached, stopping sweep", flush=True)
            break
        try:
            out = fn(cfg)
            s = snr_db(out, r) if r is not None else None
            ms = bench(lambda fn=fn, cfg=cfg: fn(cfg))
            rec = {
                "shape": [M, N, K],
                "what": what,
                "cfg": "shipped" if cfg is None else repr(cfg),
                "ms": ms,
                "tflops": tflops(M, N, K, ms),
                "snr": s,
            }
        except Exception as exc:  # noqa: BLE001 - a failing config is a result
            cfg_name = "shipped" if cfg is None else repr(cfg)
            rec = {"shape": [M, N, K], "what": what, "cfg": cfg_name, "error": str(exc)[:300]}
        results.append(rec)
        vkey = what if what in vend else None
        ratio = rec.get("tflops", 0) / tflops(M, N, K, vend[vkey]) if vkey else float("nan")
        print(
            f"{M}x{N}x{K} {what:14s} {rec.get('tflops', -1):7.1f} TF r={ratio:.3f} "
            f"snr={rec.get('snr')} {_short(cfg)} {rec.get('error', '')[:80]}",
            flush=True,
        )


def _short(c: GemmConfig | None) -> str:
    if c is None:
        return "shipped (the bucket's config)"
    if not isinstance(c, GemmConfig):  # another kernel's config (the Gluon weight gradient's)
        return repr(c)
    return (
        f"{c.block_m}x{c.block_n}x{c.block_k} w{c.num_warps} s{c.num_stages}"
        f"{' tma' if c.use_tma else ''}{' pers' if c.persistent else ''}"
        f"{' ku2' if c.k_unroll == 2 else ''}{' ws' if c.warp_specialize else ''}"
        f"{' flat' if c.flatten else ''}{f' st{c.tma_store}' if c.tma_store else ''}"
        f"{f' sk{c.split_k}' if c.split_k > 1 else ''}{' streamK' if c.stream_k else ''}"
    )


#: The 16-bit GEMMs of a Linear as the sweeps name them: (config kind, the launcher's
#: (M, N, K) of that GEMM from the Linear's M, N, K).
LINEAR_GEMMS = {
    "bf16.fwd": ("bf16", lambda M, N, K: (M, N, K)),
    "bf16.da": ("bf16_bwd", lambda M, N, K: (M, K, N)),
    "bf16.db": ("bf16_bwd", lambda M, N, K: (N, K, M)),
}


def bucket_scores(
    results: list[dict], min_snr: float = 40.0, keep: Callable[..., bool] | None = None
) -> dict[tuple[str, str], dict[str, dict[tuple, float]]]:
    """Per (kind, bucket) of the swept 16-bit GEMMs: {config: {GEMM: speed against the vendor}}
    for the configs (``"shipped"`` or a ``GemmConfig`` repr) that ran and passed the SNR check
    on every GEMM of that bucket. ``keep(kind, M, N, K, what)``: only the GEMMs it accepts
    (``what``: the sweep's name of the Linear's GEMM, ``bf16.fwd``, ``bf16.da`` or ``bf16.db``)."""
    vendor: dict[tuple, float] = {}
    times: dict[tuple, dict[str, dict[tuple, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in results:
        if r["what"] not in LINEAR_GEMMS:
            continue
        kind, dims = LINEAR_GEMMS[r["what"]]
        if keep is not None and not keep(kind, *dims(*r["shape"]), r["what"]):
            continue
        key = (r["what"], tuple(r["shape"]))
        if r.get("cfg") == "vendor":
            vendor[key] = r["ms"]
        elif "ms" in r and (r.get("snr") is None or r["snr"] >= min_snr):
            times[(kind, bucket_for(*dims(*r["shape"])))][r["cfg"]][key] = r["ms"]
    out = {}
    for group, by_cfg in times.items():
        gemms = set().union(*(set(t) for t in by_cfg.values()))
        out[group] = {
            c: {k: vendor[k] / ms for k, ms in t.items()}
            for c, t in by_cfg.items()
            if set(t) == gemms and all(k in vendor for k in t)
        }
    return {g: s for g, s in out.items() if s}


def geomean_speed(speeds: dict[tuple, float]) -> float:
    """Geometric mean of one config's speeds against the vendor."""
    return math.exp(sum(math.log(x) for x in speeds.values()) / len(speeds))


def bucket_table(results: list[dict], min_snr: float = 40.0) -> list[str]:
    """Per (kind, bucket) of the swept 16-bit GEMMs: the shipped config's and the best
    candidate's geometric mean of speed against the vendor, over the GEMMs of that bucket (a
    candidate counts only if it ran and passed the SNR check on all of them): what a bucket
    change would buy on the swept shapes, to be decided by a campaign."""
    lines = []
    for (kind, bucket), speeds in sorted(bucket_scores(results, min_snr).items()):
        scores = {c: geomean_speed(v) for c, v in speeds.items()}
        best = max(scores, key=scores.__getitem__)
        shipped = scores.get("shipped", math.nan)
        n = len(next(iter(speeds.values())))
        lines.append(
            f"{kind:8s} {bucket:7s} {n:2d} GEMMs: shipped {shipped:.3f}, best "
            f"{scores[best]:.3f} {_named(best)}{worst_gemm(speeds, best)}"
        )
    return lines


def worst_gemm(speeds: dict[str, dict[tuple, float]], best: str) -> str:
    """Where ``best`` loses most to the shipped config, GEMM by GEMM (``speeds`` as
    :func:`bucket_scores` gives them): a geomean gain can hide a slower GEMM that a campaign
    will roll the change back for."""
    if best == "shipped" or "shipped" not in speeds:
        return ""
    ship, cand = speeds["shipped"], speeds[best]
    key = min(cand, key=lambda k: cand[k] / ship[k])
    what, (M, N, K) = key
    return f"; worst GEMM {cand[key] / ship[key]:.2f}x of shipped ({what} {M}x{N}x{K})"


def parse_config(cfg: str) -> GemmConfig:
    """A ``GemmConfig`` repr as the sweep records it, back as the config."""
    fields = dict(re.findall(r"(\w+)=(\w+)", cfg))
    return GemmConfig(
        **{k: v == "True" if v in ("True", "False") else int(v) for k, v in fields.items()}
    )


def _named(cfg: str) -> str:
    """A result's config (``"shipped"`` or a ``GemmConfig`` repr) in :func:`_short`'s words."""
    return _short(parse_config(cfg)) if cfg.startswith("GemmConfig(") else cfg
