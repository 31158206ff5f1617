"""CUDA: no persisting L2 lines may survive into a measurement.

A candidate can set a persisting-L2 limit (``cudaLimitPersistingL2CacheSize``) and a persisting
access-policy window on the calling stream, so that its inputs stay in L2 through the timing
engine's L2 flush and a memory-bound kernel reads faster than it would in a real step.
:func:`persisting_l2` reports such state after the candidate ran; :func:`reset_persisting_l2`
demotes persisting lines to normal ones before each timed sample.

Both talk to the CUDA runtime library torch loaded (found in ``/proc/self/maps``) through
``ctypes``; where it cannot be found or a call fails, they do nothing (the check is then
absent, never a false alarm).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

#: cudaLimitPersistingL2CacheSize
LIMIT_PERSISTING_L2 = 0x06
#: cudaStreamAttributeAccessPolicyWindow (= cudaLaunchAttributeAccessPolicyWindow)
ATTR_ACCESS_POLICY_WINDOW = 1


@functools.cache
def _cudart() -> Any:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                if "libcudart.so" in line:
                    return ctypes.CDLL(line.split()[-1])
    except OSError:
        return None
    return None


def persisting_limit() -> int | None:
    """The device's persisting-L2 limit in bytes, or None when it cannot be read. Read it once
    before any candidate code runs: a device may have a non-zero limit of its own."""
    rt = _cudart()
    if rt is None:
        return None
    limit = ctypes.c_size_t(0)
    err = rt.cudaDeviceGetLimit(ctypes.byref(limit), ctypes.c_int(LIMIT_PERSISTING_L2))
    return int(limit.value) if err == 0 else None


def persisting_l2(baseline_limit: int | None) -> list[str]:
    """What persisting-L2 state the process holds beyond the device's own: a persisting limit
    above ``baseline_limit`` (the limit read before any candidate code ran), or an
    access-policy window on the current stream. Empty when none, or when unknowable."""
    import torch

    rt = _cudart()
    if rt is None or baseline_limit is None:
        return []
    found = []
    limit = persisting_limit()
    if limit is not None and limit > baseline_limit:
        found.append(f"persisting L2 limit raised from {baseline_limit} to {limit} bytes")
    window = ctypes.create_string_buffer(64)  # cudaStreamAttrValue: a 64-byte union
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    err = rt.cudaStreamGetAttribute(stream, ctypes.c_int(ATTR_ACCESS_POLICY_WINDOW), window)
    if err == 0:
        num_bytes = int.from_bytes(window.raw[8:16], "little")
        if num_bytes:
            found.append(f"an access-policy window of {num_bytes} bytes on the calling stream")
    return found


def reset_persisting_l2() -> None:
    """Demote every persisting L2 line to normal (``cudaCtxResetPersistingL2Cache``)."""
    rt = _cudart()
    if rt is not None:
        rt.cudaCtxResetPersistingL2Cache()
