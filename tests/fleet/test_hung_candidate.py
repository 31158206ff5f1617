"""A candidate that hangs on a CPU worker of a local Dask cluster: the pool gives it up at the
candidate time limit (`--candidate-timeout`), as a sentence the round records as the
candidate's loss, and restarts the worker that ran it, which then takes work again."""

from __future__ import annotations

import importlib
import os

import pytest

pytest.importorskip("distributed")

from kernel_ratchet.campaign.candidate import FAULT_ENV, CandidateJob  # noqa: E402
from kernel_ratchet.fleet.pool import DaskPool, open_cluster  # noqa: E402


@pytest.mark.slow
def test_a_hung_candidate_is_lost_and_its_worker_restarted(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "7:hang")  # the workers inherit it: round 7 hangs
    job = CandidateJob("ratchet.yaml", "campaign", 7, "t", "move 7", "K1", "quick")
    said: list[str] = []
    with open_cluster(workers=1) as client:
        client.run(importlib.import_module, "kernel_ratchet.campaign.candidate")  # warm
        (hung_pid,) = client.run(os.getpid).values()
        (result,) = DaskPool(client, timeout_s=1.0).measure([job], said.append)
        new_pid = client.submit(os.getpid, pure=False).result(timeout=60)
    assert isinstance(result, str) and "candidate time limit of 1 s" in result
    assert said == [f"round-7: {result}"]
    assert new_pid != hung_pid  # the hung process is gone, a fresh worker measures on
    with pytest.raises(ProcessLookupError):
        os.kill(hung_pid, 0)
