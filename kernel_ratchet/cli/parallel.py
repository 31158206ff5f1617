"""The options of ``ratchet run`` / ``resume`` that measure several candidates at once
(:mod:`kernel_ratchet.optimizers.parallel` on :mod:`kernel_ratchet.fleet.pool`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import typer

from kernel_ratchet.cli.common import err
from kernel_ratchet.errors import RatchetError

GpusOpt = typer.Option(
    None, "--gpus", help="measure one candidate per GPU at once, e.g. 0,1 (needs the fleet extra)"
)
WorkersOpt = typer.Option(0, "--workers", help="measure N candidates at once on CPU workers")
SchedulerOpt = typer.Option(
    None, "--scheduler", help="a running Dask scheduler's address (several nodes: docs/fleet.md)"
)
CandidateTimeoutOpt = typer.Option(
    3 * 3600.0, "--candidate-timeout", help="seconds one candidate may take before it is lost"
)


@dataclass(frozen=True)
class Parallel:
    """Where a run's candidates are measured: ``gpus``, ``workers`` CPU workers, or the
    cluster at ``scheduler``; none of them: one at a time, in this process."""

    gpus: str | None = None
    workers: int = 0
    scheduler: str | None = None
    timeout_s: float = 3 * 3600.0

    @property
    def wanted(self) -> bool:
        return bool(self.gpus or self.workers or self.scheduler)

    def check(self) -> None:
        """Raise RatchetError (exit 2) for options that do not fit together, or for asking
        for workers without Dask installed; before anything else is done."""
        if not self.wanted:
            return
        if sum(map(bool, (self.gpus, self.workers, self.scheduler))) > 1:
            raise RatchetError("give one of --gpus, --workers or --scheduler")
        if self.workers < 0 or self.timeout_s <= 0:
            raise RatchetError("--workers and --candidate-timeout must be positive")
        from kernel_ratchet.fleet import require_dask
        from kernel_ratchet.fleet.pool import parse_gpus

        if self.gpus:
            parse_gpus(self.gpus)
        require_dask()


@contextlib.contextmanager
def round_runner(p: Parallel) -> Iterator[object | None]:
    """The loop's round runner on a Dask cluster (None: rounds one at a time, as always)."""
    if not p.wanted:
        yield None
        return
    p.check()
    from kernel_ratchet.fleet.pool import DaskPool, one_model, open_cluster, parse_gpus
    from kernel_ratchet.optimizers.parallel import ParallelRounds

    gpus = parse_gpus(p.gpus) if p.gpus else []
    with open_cluster(gpus, p.workers, p.scheduler) as client:
        pool = DaskPool(client, p.timeout_s)
        model = one_model(client)
        err.print(f"measuring up to {pool.slots} candidates at once on {model}")
        yield ParallelRounds(pool)
