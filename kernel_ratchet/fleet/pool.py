"""The candidates of a parallel round measured on Dask workers.

One worker per slot, one thread each, so a worker measures one candidate at a time on its one
device. ``--gpus 0,1``: a local cluster whose worker ``gpu-<i>`` sees only GPU ``i``
(``CUDA_VISIBLE_DEVICES`` set by its nanny before the process starts); ``--workers N``: N CPU
workers; ``--scheduler ADDRESS``: the workers of a running cluster (several nodes over SSH, or
SLURM jobs through dask-jobqueue; see docs/fleet.md). Every worker must see the project and the
campaign directory at the same paths (one node, or a shared file system).

A candidate's failure is its record; a worker that dies, hangs past the candidate time limit or
raises (a lost GPU) gives a sentence instead, which the round records as that candidate's loss.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernel_ratchet.campaign.candidate import CandidateJob, measure_candidate
from kernel_ratchet.errors import RatchetError
from kernel_ratchet.fleet import require_dask

#: Default wall-clock limit of one candidate (focused test, harness, paired A/B, transfer).
CANDIDATE_TIMEOUT_S = 3 * 3600.0


def parse_gpus(spec: str) -> list[str]:
    """``"0,1"`` -> ``["0", "1"]``. Raises RatchetError for an empty, repeated or non-numeric
    entry."""
    gpus = [g.strip() for g in spec.split(",") if g.strip()]
    if not gpus or not all(g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise RatchetError(f"--gpus takes distinct GPU indices, e.g. --gpus 0,1 (got {spec!r})")
    return gpus


def device_name() -> str:
    """What a worker measures on: its GPU's model, or ``cpu``."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def open_cluster(
    gpus: Sequence[str] = (), workers: int = 0, scheduler: str | None = None
) -> Iterator[Any]:
    """A Dask client on a local cluster (one worker per GPU of ``gpus``, else ``workers`` CPU
    workers) or on the running cluster at ``scheduler``; closed on exit. A worker that dies
    fails its task at once (no re-run elsewhere)."""
    require_dask()
    import dask
    from distributed import Client, LocalCluster, Nanny, Scheduler, SpecCluster

    opts = {"distributed.scheduler.allowed-failures": 0, "distributed.worker.daemon": False}
    with dask.config.set(opts):
        if scheduler:
            with Client(scheduler) as client:
                yield client
            return
        if gpus:
            specs = {
                f"gpu-{g}": {
                    "cls": Nanny,
                    "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": g}},
                }
                for g in gpus
            }
            sched = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
            cluster = SpecCluster(workers=specs, scheduler=sched, silence_logs=40)
        else:
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # any free port: several clusters may run at once
                silence_logs=40,
            )
        with cluster, Client(cluster) as client:
            client.wait_for_workers(len(gpus) or workers, timeout=300)
            yield client


def one_model(client: Any) -> str:
    """The one device model every worker measures on; raises RatchetError when the workers
    hold different models (their gains are not comparable)."""
    names = client.run(device_name)
    models = sorted(set(names.values()))
    if len(models) != 1:
        raise RatchetError(
            f"the workers hold different devices ({', '.join(models)}); a parallel round "
            "compares gains across them: give --gpus of one model, or run one campaign per "
            "model (`ratchet fleet`)"
        )
    return models[0]


@dataclass
class DaskPool:
    """A :class:`~kernel_ratchet.optimizers.parallel.CandidatePool` on a Dask client."""

    client: Any
    timeout_s: float = CANDIDATE_TIMEOUT_S
    slots: int = field(init=False)

    def __post_init__(self) -> None:
        info = self.client.scheduler_info()["workers"]
        self.slots = sum(w.get("nthreads", 1) for w in info.values())
        if self.slots < 1:
            raise RatchetError("the Dask cluster has no workers")

    def measure(
        self, jobs: Sequence[CandidateJob], say: Callable[[str], None]
    ) -> list[dict[str, Any] | str]:
        from distributed import TimeoutError as DaskTimeout
        from distributed import wait

        futures = [
            self.client.submit(
                measure_candidate, job, key=f"round-{job.round}-{time.time_ns()}", pure=False
            )
            for job in jobs
        ]
        with contextlib.suppress(DaskTimeout):  # the ones not done by then are lost
            wait(futures, timeout=self.timeout_s, return_when="ALL_COMPLETED")
        return [self._outcome(f, job, say) for f, job in zip(futures, jobs, strict=True)]

    def _outcome(self, future: Any, job: CandidateJob, say: Callable[[str], None]) -> Any:
        from distributed import KilledWorker

        if future.status == "finished":
            return future.result()
        if future.status == "error":
            exc = future.exception()
            if isinstance(exc, KilledWorker):
                why = "its worker process died while measuring it"
            else:
                why = f"its worker failed ({type(exc).__name__}: {str(exc)[:300]})"
            say(f"round-{job.round}: {why}")
            return why
        self._stop_hung(future)
        why = f"it ran past the candidate time limit of {self.timeout_s:g} s (worker restarted)"
        say(f"round-{job.round}: {why}")
        return why

    def _stop_hung(self, future: Any) -> None:
        """Cancel a task past its limit and restart the worker running it (its processes
        with it)."""
        running = [w for w, keys in self.client.processing().items() if future.key in keys]
        future.cancel()
        if running:
            with contextlib.suppress(Exception):  # a worker already gone is what we want
                self.client.restart_workers(running)
