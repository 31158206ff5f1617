"""The verdict of the dynamic transfer check, as the records keep it: readable without torch,
which only the simulation itself (:mod:`.dynamic_transfer`) needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel_ratchet.harness.cache_probe import CacheStats

OVERFIT, TRANSFERS = "OVERFIT", "TRANSFERS"
#: Default noise floor of :func:`simulate_training`, as a fraction of the benchmark time.
MIN_REL_GAP = 0.03


@dataclass(frozen=True)
class DynamicResult:
    """Both idioms' per-step times in ms (the op's forward and backward calls alone) and the
    verdict."""

    label: str
    steps: int
    repeats: int
    bench_ms: float
    train_ms: float
    gap_ms: float
    noise_ms: float
    verdict: str  # OVERFIT | TRANSFERS
    reason: str
    train_caches: tuple[CacheStats, ...] = ()
    bench_caches: tuple[CacheStats, ...] = ()

    @property
    def gap_rel(self) -> float:
        """Training-idiom slowdown relative to the benchmark idiom (0.1 = 10% slower)."""
        return self.gap_ms / self.bench_ms if self.bench_ms > 0 else 0.0

    def hit_rate_text(self) -> str:
        """One line per cache looked up in either idiom: training-idiom hits, with the
        benchmark idiom's for contrast; the tables neither idiom looked up (constants, tables
        of other paths) are counted, not listed."""
        if not self.train_caches:
            return "no cache found in the kernel module"
        bench = {c.name: c for c in self.bench_caches}
        parts, unused = [], 0
        for c in self.train_caches:
            b = bench.get(c.name)
            if not c.lookups and not (b and b.lookups):
                unused += 1
                continue
            extra = f"; benchmark idiom {b.hits}/{b.lookups}" if b else ""
            parts.append(f"training {c.describe()}{extra}")
        if unused:
            parts.append(f"{unused} other module-level tables not looked up in either idiom")
        return "; ".join(parts)

    def to_payload(self) -> dict[str, Any]:
        """The summary a round records for one side's simulation (no per-repeat times)."""
        keys = ("label", "steps", "repeats", "bench_ms", "train_ms", "gap_ms", "noise_ms")
        out: dict[str, Any] = {k: getattr(self, k) for k in keys}
        out.update(verdict=self.verdict, reason=self.reason, hit_rates=self.hit_rate_text())
        return out
