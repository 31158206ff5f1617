"""The incumbent's and the candidate's worker of one round, started once and reused.

A worker's start (a Python process importing torch, the harness and the op's adapter, on a
GPU also its CUDA context) costs seconds; a round used to pay it twice per side (the paired
A/B, then the transfer check). :class:`RoundWorkers` starts both workers when the focused test
starts, so their start-up runs beside the test, which needs no exclusive device; before any
timing (the harness, the A/B) :meth:`RoundWorkers.settle` waits until both are idle, so no
import competes with a timed call. The A/B borrows them (:meth:`RoundWorkers.lend`) and the
transfer check runs in them after it. What each request checks and measures is unchanged: every
request carries its own inputs, seeds and anti-cheat checks, and a worker that failed is never
lent again (a fresh one is started in its place, as before). The fresh-process confirmation of a
suspiciously large gain never borrows them: it exists to measure in fresh processes.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.rounds.paired import _specs, candidate_spec
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.paired_checks import SIDES, Prechecked, precheck
from kernel_ratchet.harness.paired_run import Failure
from kernel_ratchet.harness.worker import STARTUP_GRACE_S, Worker

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.harness.worker import WorkerSpec

#: Where the round's workers write their logs: the paired A/B's log folder, so the A/B's
#: record names the log its workers wrote.
LOG_DIR = "paired"
#: ``0`` makes the A/B's checks after the harness instead of beside the focused test: for a GPU
#: too small to hold the test and both workers' checks of the largest shape at once.
EARLY_ENV = "RATCHET_EARLY_CHECKS"


class RoundWorkers:
    """One worker per side for one round (context manager: closes them, also on Ctrl+C).

    ``start`` launches both (non-blocking); ``check_early`` starts the A/B's correctness checks
    in the background; ``settle`` waits for both to finish starting and checking;
    ``lend`` gives a ``worker_factory`` for :func:`~kernel_ratchet.harness.ab.run_paired`;
    ``live`` the still-healthy workers by side for the transfer check."""

    def __init__(self, c: CampaignContext, art: Path) -> None:
        self._c = c
        self.log_dir = Path(art) / LOG_DIR
        self._workers: dict[str, Worker] = {}
        #: The secret of the round's own A/B: its check seeds derive from it
        self.secret = secrets.randbits(63)
        self._checks: dict[tuple[str, str], tuple[Any, int, Any, float]] = {}
        self._checking: threading.Thread | None = None
        #: Whether the A/B's checks started beside the focused test (:meth:`check_early`)
        self.checked_early = False

    def start(self, candidate_only: bool = False) -> None:
        """Launch both workers, or the candidate's alone (a fix round with nothing to pair
        with); their start-up runs in the background."""
        if self._workers:
            return
        if candidate_only:
            self._workers["candidate"] = Worker(candidate_spec(self._c), self.log_path(SIDES[1]))
            return
        for side, spec in zip(SIDES, _specs(self._c), strict=True):
            self._workers[side] = Worker(spec, self.log_path(side))

    def candidate_failure(self, shape_dicts: list[dict]) -> Failure | None:
        """The first failure of the candidate's own checks on ``shape_dicts`` (fresh inputs
        from the round's secret, the reference and the anti-cheat checks, in a worker that
        imports the candidate as the A/B's does), or None when every shape passes. Reuses the
        checks :meth:`check_early` made; makes them now (in a fresh worker where the round's
        failed to start) when it made none."""
        self.settle()
        side = SIDES[1]
        done = {k[1]: v for k, v in self.prechecked().items() if k[0] == side}
        if not done:
            self.start(candidate_only=True)
            shapes = [Shape.from_dict(d) for d in shape_dicts]
            checks = precheck({side: self._workers[side]}, shapes, self.secret)
            done = {k[1]: v for k, v in checks.items()}
        log = str(self.log_path(side))
        for label, (_worker, _seed, res, _secs) in done.items():
            if not res.ok:
                return Failure(side, "check", label, res.category, res.detail, log)
        return None

    def log_path(self, side: str) -> Path:
        return self.log_dir / f"{side}_worker.log"

    def check_early(self, shape_dicts: list[dict]) -> None:
        """Start, in the background, the correctness checks the round's A/B begins with, on
        ``shape_dicts`` (the manifest's shapes of the round's level): they time nothing, so
        they run beside the focused test. :meth:`settle` waits for them; :meth:`prechecked`
        hands their results to the A/B."""
        if not self._workers or self._checking is not None or os.environ.get(EARLY_ENV) == "0":
            return
        shapes = [Shape.from_dict(d) for d in shape_dicts]
        workers = dict(self._workers)

        def run() -> None:
            try:
                self._checks = precheck(workers, shapes, self.secret)
            except Exception:  # noqa: BLE001 - the A/B then makes its checks itself
                self._checks = {}

        checking = threading.Thread(target=run, name="kr-early-checks", daemon=True)
        checking.start()  # kept once started: a SIGTERM inside start() leaves nothing to join
        self._checking = checking
        self.checked_early = True

    def prechecked(self) -> Prechecked:
        """The early checks' results (empty until :meth:`settle` has waited for them)."""
        return self._checks if self._checking is None else {}

    def settle(self) -> None:
        """Wait until every started worker is idle (ready, or failed to start, and done with
        the early checks): timing must not share the machine with an import or a check. A
        worker that failed to start is dropped; the step that needs it starts a fresh one,
        which records the failure as before."""
        if self._checking is not None:
            self._checking.join()  # each check has its worker's request timeout
            self._checking = None
        for side, w in list(self._workers.items()):
            deadline = time.monotonic() + w.spec.timeout_s + STARTUP_GRACE_S
            if not w.wait_ready(deadline):
                w.close()
                del self._workers[side]

    def lend(self) -> Callable[[WorkerSpec, Path], Any]:
        """A ``worker_factory``: the round's worker of the next side (incumbent first, the
        order in which ``run_paired`` opens them) when it is healthy and matches the requested
        spec and log, else a fresh :class:`Worker`."""
        sides: Iterator[str] = iter(SIDES)

        def factory(spec: WorkerSpec, log_path: Path) -> Any:
            w = self._workers.get(next(sides, ""))
            if w is not None and w.alive and w.spec == spec and Path(log_path) == w.log_path:
                return nullcontext(w)  # lent: the round closes it
            return Worker(spec, log_path)

        return factory

    def release(self) -> None:
        """Ask each healthy worker to give back its cached device memory: idle, it would
        still hold what its largest shape took while the harness times in another process
        (on an 80 GB GPU, two workers' caches of a large grouped GEMM left the harness out of
        memory). A worker that fails here is left for the next step to replace."""
        for w in self.live().values():
            w.release()

    def live(self) -> dict[str, Worker]:
        """The round's healthy workers by side (a failed one is left out)."""
        return {side: w for side, w in self._workers.items() if w.alive}

    def close(self, grace_s: float = 5.0) -> None:
        """Close both workers at once (killed when they do not exit within ``grace_s``): a GPU
        worker's exit tears down its CUDA context, which need not wait for the other's.
        Early checks still running end with them."""
        closing = [
            threading.Thread(target=w.close, args=(grace_s,), daemon=True)
            for w in self._workers.values()
        ]
        for t in closing:
            t.start()
        for t in closing:
            t.join()
        self._workers.clear()
        if self._checking is not None:
            self._checking.join(timeout=grace_s + 5.0)
            self._checking = None

    def __enter__(self) -> RoundWorkers:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # an interrupted or failed round does not wait for a busy worker to finish
        self.close(5.0 if exc_type is None else 0.0)
