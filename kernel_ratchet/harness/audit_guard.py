"""What a kept function runs cannot be changed in a worker: an interpreter audit hook refuses it.

The :class:`~kernel_ratchet.harness.anticheat.Sentinel` compares what it kept with what is
there whenever it verifies; a candidate that gives a checker function new code (``__code__``)
or new defaults during one timed sample and puts them back during the next is not there to
be seen at either verification, and the checks in between run the candidate's code. An audit
hook (:func:`sys.addaudithook`, PEP 578) sees the write itself: CPython raises the
``object.__setattr__`` / ``object.__delattr__`` event before it changes a function's
``__code__``, ``__defaults__`` or ``__kwdefaults__``, and a hook that raises stops the write.
A hook cannot be removed once added, and this one is reachable only through the guard object
the worker holds, so the candidate cannot switch it off from Python (a compiled extension
still can: see ``docs/threat-model.md``).

Only the functions :meth:`Guard.protect` was given are refused (the harness's, the kept
library surface's and the adapter's): torch's own compiler rewrites the code and defaults of
functions it wraps, which stays allowed.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

from kernel_ratchet.harness.cheat import CheatDetected

#: The attributes that say what a function runs.
BODY = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
_EVENTS = frozenset({"object.__setattr__", "object.__delattr__"})


class _NotAdded(RuntimeError):
    """Raised for ``sys.addaudithook``: a RuntimeError there silently keeps the new hook out
    (PEP 578); the refusal is reported by :meth:`Guard.refused`."""


def _label(fn: types.FunctionType) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


class Guard:
    """The audit hook of one worker process: :meth:`protect` adds functions to it,
    :meth:`refused` names every write it stopped (a candidate that catches the exception has
    still been seen)."""

    def __init__(self) -> None:
        protected: set[int] = set()
        held: list[Any] = []  # the protected functions, alive, so that their ids stay theirs
        refused: list[str] = []

        def hook(event: str, args: tuple[Any, ...]) -> None:
            if event == "sys.addaudithook":  # a hook of the candidate's runs inside the checks
                refused.append("sys.addaudithook")
                raise _NotAdded("only the worker's own audit hook may run")
            if event not in _EVENTS or len(args) < 2 or args[1] not in BODY:
                return
            if id(args[0]) not in protected:
                return
            what = f"{_label(args[0])}.{args[1]}"
            refused.append(what)
            raise CheatDetected(
                f"the candidate changed what a checker function runs: {what} written while "
                "it ran (new code or defaults in the harness's, the library's or the "
                "adapter's functions fake the checks)"
            )

        self._protected, self._held, self._refused = protected, held, refused
        sys.addaudithook(hook)

    def protect(self, values: Iterable[Any]) -> int:
        """Refuse from now on any change of what these functions (methods, static and class
        methods: their functions) run; returns how many are protected in all."""
        for value in values:
            fn = getattr(value, "__func__", value)
            if isinstance(fn, types.FunctionType) and id(fn) not in self._protected:
                self._held.append(fn)
                self._protected.add(id(fn))
        return len(self._protected)

    def refused(self) -> list[str]:
        """Every write the hook stopped, in order."""
        return list(self._refused)


def methods_of(obj: Any) -> list[Any]:
    """The functions of ``obj``'s class and its bases (an adapter's ``reference``,
    ``make_case``, ``threshold``...), for :meth:`Guard.protect`."""
    return [v for klass in type(obj).__mro__ if klass is not object for v in vars(klass).values()]
