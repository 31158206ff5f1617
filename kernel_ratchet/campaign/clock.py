"""Timestamps: ``YYYY-MM-DD HH:MM``, local time read at the moment of writing (SPEC section 4)."""

from __future__ import annotations

import datetime as _dt


def now() -> str:
    """The local time as ``YYYY-MM-DD HH:MM``."""
    return _dt.datetime.now().strftime("%Y-%m-%d %H:%M")


def today() -> str:
    """The local date as ``YYYYMMDD`` (campaign names)."""
    return _dt.datetime.now().strftime("%Y%m%d")
