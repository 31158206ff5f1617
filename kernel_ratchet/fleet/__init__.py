"""Campaigns on many GPUs, on Dask distributed (the optional extra ``fleet``).

:mod:`.pool` measures the candidates of a parallel round on Dask workers, one per GPU (or CPU
slot), for ``ratchet run --gpus``; :mod:`.campaigns` runs the campaigns of several ops at once
for ``ratchet fleet``. Nothing here is imported unless one of them is asked for: the core works
without Dask.
"""

from __future__ import annotations

from kernel_ratchet.errors import RatchetError

INSTALL = "pip install 'kernel-ratchet[fleet]'  (or: pip install 'dask[distributed]')"


def require_dask() -> None:
    """Raise RatchetError (exit 2) naming what to install when Dask distributed is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise RatchetError(
            f"several GPUs or workers need Dask distributed, which is not installed: {INSTALL}"
        ) from None
