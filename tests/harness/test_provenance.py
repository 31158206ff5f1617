"""Provenance next to every benchmark.csv; CPU-only, GPU paths faked."""

from __future__ import annotations

import json
import sys
import types

import pytest

from kernel_ratchet.harness import provenance as pv
from kernel_ratchet.harness.paired_run import SEED_POLICY
from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine

ENGINE = PerfCounterEngine().describe()


def collect(**kw):
    kw = {"candidate_commit": "abc123", "seed_policy": SEED_POLICY, "device": "cpu", **kw}
    return pv.collect_provenance(ENGINE, **kw)


def test_cpu_provenance_has_every_field_and_is_json():
    p = collect()
    assert p["schema"] == pv.PROVENANCE_SCHEMA and p["engine"] == ENGINE
    assert p["device"] == "cpu" and p["gpu"] is None
    assert p["candidate_commit"] == "abc123" and "secret" in p["seed_policy"]
    v = p["versions"]
    assert v["python"].count(".") == 2 and v["torch"] and v["numpy"]
    assert {"triton", "cuda", "cudnn", "kernel-ratchet"} <= set(v)
    assert len(p["environment_hash"]) == 64
    json.dumps(p)


def test_a_checkout_on_the_path_names_its_own_version(monkeypatch):
    """Run from a source tree (PYTHONPATH, no install), the tool's version is still known."""
    from kernel_ratchet import __version__

    real = pv.metadata.version

    def version(name):
        if name == "kernel-ratchet":
            raise pv.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(pv.metadata, "version", version)
    assert pv.package_versions()["kernel-ratchet"] == f"{__version__} (not installed)"


def test_environment_hash_tracks_env_and_versions_not_commit_or_time(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    a = collect()
    assert collect(candidate_commit="other")["environment_hash"] == a["environment_hash"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    b = collect()
    assert b["env"]["TRITON_INTERPRET"] == "1" and b["environment_hash"] != a["environment_hash"]
    changed = {**b, "versions": {**b["versions"], "torch": "0.0"}}
    assert pv.environment_hash(changed) != b["environment_hash"]


def test_relevant_env_keeps_measurement_vars_and_drops_secrets():
    env = {
        "CUDA_VISIBLE_DEVICES": "0",
        "HF_TOKEN": "x",
        "TRITON_API_KEY": "y",
        "OMP_NUM_THREADS": "4",
        "HOME": "/root",
        "PYTORCH_CUDA_ALLOC_CONF": "a",
    }
    assert pv.relevant_env(env) == {
        "CUDA_VISIBLE_DEVICES": "0",
        "OMP_NUM_THREADS": "4",
        "PYTORCH_CUDA_ALLOC_CONF": "a",
    }


def fake_nvml(monkeypatch):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM = 1, 2
    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: ("h", i)
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    m.nvmlSystemGetDriverVersion = lambda: "570.86.15"
    m.nvmlDeviceGetClockInfo = lambda h, kind: {1: 1755, 2: 3201}[kind]
    m.nvmlDeviceGetMaxClockInfo = lambda h, kind: {1: 1980, 2: 3201}[kind]
    monkeypatch.setitem(sys.modules, "pynvml", m)


def test_gpu_info_through_pynvml(monkeypatch):
    fake_nvml(monkeypatch)
    p = collect(device="cuda:0")
    assert p["gpu"] == {
        "name": "NVIDIA H200",
        "driver_version": "570.86.15",
        "sm_clock_mhz": 1755,
        "mem_clock_mhz": 3201,
        "max_sm_clock_mhz": 1980,
        "max_mem_clock_mhz": 3201,
        "source": "pynvml",
    }
    assert p["environment_hash"] != collect()["environment_hash"]  # device and GPU count


def test_gpu_info_falls_back_to_nvidia_smi_then_to_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails

    def smi(cmd, **kw):
        assert "--id=1" in cmd
        out = "NVIDIA H200, 570.86.15, 1470, 3201, 1980, 3201\n"
        return types.SimpleNamespace(returncode=0, stdout=out)

    monkeypatch.setattr(pv.subprocess, "run", smi)
    g = pv.gpu_info("cuda:1")
    assert g["sm_clock_mhz"] == 1470 and g["source"] == "nvidia-smi"

    def missing(cmd, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(pv.subprocess, "run", missing)
    g = pv.gpu_info("cuda")
    assert g["source"] == "torch" and g["sm_clock_mhz"] is None  # name only, maybe None on CPU


def test_write_provenance_is_atomic_json(tmp_path):
    path = tmp_path / "artifacts" / "provenance.json"
    p = collect()
    pv.write_provenance(path, p)
    assert json.loads(path.read_text()) == p
    with pytest.raises(TypeError):
        pv.write_provenance(path, {"bad": object()})
    assert json.loads(path.read_text()) == p  # the old file survives a failed write
    assert [f.name for f in path.parent.iterdir()] == ["provenance.json"]
