"""Provenance written next to every ``benchmark.csv``: how, where and on what it was measured.

:func:`collect_provenance` returns a JSON-ready dict (schema ``PROVENANCE_SCHEMA``):

* ``engine``: the timing engine's ``describe()`` (name and parameters);
* ``device``, ``gpu`` (None on the CPU): name, SM/memory clocks now and max, driver version,
  through ``pynvml`` when installed, else ``nvidia-smi``, else torch alone (name only);
* ``versions``: python, torch, triton, numpy, CUDA (torch's build), cuDNN, kernel_ratchet;
* ``host``: platform and CPU count; ``candidate_commit``; ``seed_policy``;
* ``env``: the relevant environment variables (CUDA/Triton/torch/NCCL/thread settings; names
  that look like secrets are left out);
* ``environment_hash``: sha256 over the canonical JSON of ``env``, ``versions``, device, GPU
  name and driver -- the things that must not change within a campaign. Clocks, commit, time
  and engine are excluded: they change legitimately between rounds or are recorded apart.

Collecting never raises for a missing tool or library: what cannot be read is None.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

PROVENANCE_SCHEMA = 1
ENV_PREFIXES = ("CUDA_", "TRITON_", "TORCH", "PYTORCH_", "NVIDIA_", "CUBLAS", "CUDNN", "NCCL_")
ENV_NAMES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_LIBRARY_PATH", "LD_PRELOAD")
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")
PACKAGES = ("torch", "triton", "numpy", "kernel-ratchet")
NVIDIA_SMI_TIMEOUT_S = 10.0


def relevant_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables that can change a measurement, sorted, secrets left out."""
    env = os.environ if environ is None else environ
    keep = {}
    for name in sorted(env):
        if any(m in name.upper() for m in SECRET_MARKERS):
            continue
        if name.startswith(ENV_PREFIXES) or name in ENV_NAMES:
            keep[name] = env[name]
    return keep


def package_versions() -> dict[str, str | None]:
    """Installed versions of the measurement stack (None when absent) plus python and CUDA."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out["kernel-ratchet"] is None:  # imported from a checkout on sys.path, not installed
        from kernel_ratchet import __version__

        out["kernel-ratchet"] = f"{__version__} (not installed)"
    out["cuda"] = out["cudnn"] = None
    try:
        import torch

        out["cuda"] = torch.version.cuda
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        out["cudnn"] = None if cudnn is None else str(cudnn)
    except Exception:  # torch missing or broken: the versions say so (None)
        pass
    return out


def _index(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0


def _gpu_pynvml(index: int) -> dict[str, Any] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(h)
            driver = pynvml.nvmlSystemGetDriverVersion()
            sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
            return {
                "name": name.decode() if isinstance(name, bytes) else str(name),
                "driver_version": driver.decode() if isinstance(driver, bytes) else str(driver),
                "sm_clock_mhz": int(pynvml.nvmlDeviceGetClockInfo(h, sm)),
                "mem_clock_mhz": int(pynvml.nvmlDeviceGetClockInfo(h, mem)),
                "max_sm_clock_mhz": int(pynvml.nvmlDeviceGetMaxClockInfo(h, sm)),
                "max_mem_clock_mhz": int(pynvml.nvmlDeviceGetMaxClockInfo(h, mem)),
                "source": "pynvml",
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML present but unusable (no driver, no permission)
        return None


_SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
)


def _gpu_smi(index: int) -> dict[str, Any] | None:
    cmd = [
        "nvidia-smi",
        f"--id={index}",
        f"--query-gpu={','.join(_SMI_FIELDS)}",
        "--format=csv,noheader,nounits",
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    cells = [c.strip() for c in out.stdout.strip().split(",")]
    if out.returncode != 0 or len(cells) != len(_SMI_FIELDS):
        return None

    def mhz(x: str) -> int | None:
        return int(float(x)) if x.replace(".", "", 1).isdigit() else None

    return {
        "name": cells[0],
        "driver_version": cells[1],
        "sm_clock_mhz": mhz(cells[2]),
        "mem_clock_mhz": mhz(cells[3]),
        "max_sm_clock_mhz": mhz(cells[4]),
        "max_mem_clock_mhz": mhz(cells[5]),
        "source": "nvidia-smi",
    }


def gpu_info(device: str) -> dict[str, Any] | None:
    """GPU name, clocks and driver of ``device`` ("cuda", "cuda:1"); None for the CPU."""
    if not device.startswith("cuda"):
        return None
    index = _index(device)
    info = _gpu_pynvml(index) or _gpu_smi(index)
    if info is None:
        info = {
            "name": None,
            "driver_version": None,
            "sm_clock_mhz": None,
            "mem_clock_mhz": None,
            "max_sm_clock_mhz": None,
            "max_mem_clock_mhz": None,
            "source": "torch",
        }
        try:
            import torch

            info["name"] = torch.cuda.get_device_name(index)
        except Exception:  # no usable CUDA in this process: the name stays None
            pass
    return info


def environment_hash(prov: dict[str, Any]) -> str:
    """sha256 of what must stay fixed within a campaign (see the module docstring)."""
    gpu = prov.get("gpu") or {}
    key = {
        "env": prov["env"],
        "versions": prov["versions"],
        "device": prov["device"],
        "gpu_name": gpu.get("name"),
        "driver": gpu.get("driver_version"),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def collect_provenance(
    engine_desc: dict[str, Any],
    *,
    candidate_commit: str | None,
    seed_policy: str,
    device: str,
) -> dict[str, Any]:
    """Provenance of one measurement (contract in the module docstring); never raises for a
    missing optional tool. ``engine_desc`` is the timing engine's ``describe()``."""
    prov: dict[str, Any] = {
        "schema": PROVENANCE_SCHEMA,
        "collected": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "engine": dict(engine_desc),
        "device": device,
        "gpu": gpu_info(device),
        "versions": package_versions(),
        "host": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "executable": Path(sys.executable).name,  # by name: records read the same anywhere
        },
        "candidate_commit": candidate_commit,
        "seed_policy": seed_policy,
        "env": relevant_env(),
    }
    prov["environment_hash"] = environment_hash(prov)
    return prov


def write_provenance(path: Path, prov: dict[str, Any]) -> None:
    """Write ``prov`` as JSON atomically (temp file, fsync, rename): a crash leaves the old
    file or the new one, never a torn one. Raises TypeError for a non-JSON value."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(prov, indent=2, sort_keys=True) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
