"""The one exception every anti-cheat check raises (:mod:`.anticheat`, :mod:`.returned`)."""

from __future__ import annotations


class CheatDetected(Exception):
    """The candidate did something that fakes a result or a time; ``str()`` is the reason."""
