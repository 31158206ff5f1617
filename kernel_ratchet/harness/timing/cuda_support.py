"""The pure helpers and device probes the ``cuda_events`` engine is built from.

Pure (tested on the CPU): call counts per timed call, clock settling and throttling, the
CUDA-graph choice, the flush subtraction and the host-time cross-check. Device probes: the SM
clock through pynvml and the persisting-L2 reset.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def iterations_for(target_ms: float, per_call_ms: float, min_iters: int, max_iters: int) -> int:
    """Calls in one timed call so that it lasts about ``target_ms`` (clamped to the bounds)."""
    if not per_call_ms > 0:
        return max_iters
    return max(min_iters, min(max_iters, round(target_ms / per_call_ms)))


def clock_settled(readings_mhz: list[float], window: int, tol_mhz: float) -> bool:
    """True when the last ``window`` SM-clock readings span at most ``tol_mhz``."""
    if len(readings_mhz) < window:
        return False
    last = readings_mhz[-window:]
    return max(last) - min(last) <= tol_mhz


def is_throttled(clock_mhz: float | None, settled_mhz: float | None, tol: float) -> bool:
    """A sample is throttled when its SM clock is more than ``tol`` (a fraction) below the clock
    the warm-up settled at. Unknown clocks never count as throttled."""
    if clock_mhz is None or not settled_mhz:
        return False
    return clock_mhz < (1.0 - tol) * settled_mhz


def choose_graph(mode: str, per_call_us: float, below_us: float) -> bool:
    """Whether to time through a CUDA graph: ``on``, ``off``, or ``auto`` (ops under
    ``below_us`` microseconds, where launch overhead would otherwise dominate)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return per_call_us < below_us


def per_call_ms(event_ms: float, iters: int, baseline_ms: float = 0.0) -> float:
    """Time of one call from a timed call of ``iters`` calls, less ``baseline_ms``: the time of
    the ``iters`` L2 flushes interleaved with the calls (cold-L2 graph mode; 0 otherwise).
    Not clamped: a reading at or below 0 is refused by the engine, never reported."""
    return (event_ms - baseline_ms) / iters


def host_crosscheck(
    event_ms: float, host_ms: float, ratio: float, min_host_ms: float
) -> str | None:
    """A warning when the event time is far shorter than the host time around the same timed
    call (work outside the timed stream, or events that do not bracket the work)."""
    if host_ms >= min_host_ms and event_ms < ratio * host_ms:
        return (
            f"event time {event_ms:.3f} ms is under {ratio:g}x the host time {host_ms:.3f} ms "
            "of the same timed call"
        )
    return None


def nvml_sm_clock(device: str) -> Callable[[], float | None] | None:
    """A function reading the SM clock (MHz) of ``device`` via pynvml, or None without it."""
    try:
        import pynvml  # optional: nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        props = torch.cuda.get_device_properties(device)
        try:
            bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception:
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch.device(device).index or 0)
    except Exception:
        return None

    def read() -> float | None:
        try:
            return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        except Exception:
            return None

    return read


def reset_persisting_l2() -> str:
    """Reset the persisting-L2 lines (so a previous op's access window cannot keep data hot).

    Uses a ``torch.cuda`` function when this torch has one, else ``cudaCtxResetPersistingL2Cache``
    from the CUDA runtime torch loaded, through ctypes. Returns how it was done, or why not.
    """
    for name in ("reset_persisting_l2_cache", "_reset_persisting_l2_cache"):
        fn = getattr(torch.cuda, name, None)
        if callable(fn):
            fn()
            return f"torch.cuda.{name}"
    import ctypes

    # Only the CUDA runtime this process already loaded (torch's), never a second copy.
    try:
        with open("/proc/self/maps") as maps:
            libs = sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    except OSError:
        libs = []
    for lib in libs:
        try:
            rc = ctypes.CDLL(lib).cudaCtxResetPersistingL2Cache()
        except (OSError, AttributeError):
            continue
        name = lib.rsplit("/", 1)[-1]
        return f"{name}:cudaCtxResetPersistingL2Cache" + ("" if rc == 0 else f" (error {rc})")
    return "unavailable (no torch.cuda API, no loaded libcudart)"
