"""Counting cache hits of a kernel module during a short training trace.

:func:`count_cache_hits` swaps every cache it finds in the given modules for a counting stand-in
and puts the originals back (with whatever was added meanwhile) on exit:

* module-level dicts (``dict``, ``OrderedDict``, ``defaultdict``, subclasses) and
  ``weakref.WeakKeyDictionary``/``WeakValueDictionary``, and such dicts stored as attributes of
  the module's functions (``fn.cache = {}``) and class bodies;
* ``functools.lru_cache``/``functools.cache`` functions at module level (hits read from
  ``cache_info()`` around each call; the key is the call's arguments).

Each lookup's key is classified when it happens (:meth:`CacheProbe.kind_of`): ``weight`` when it
holds a tracked weight (the tensor, its ``id`` or its ``data_ptr``), ``fresh`` when it holds any
other tensor, a tracked fresh tensor's id/address, or an untracked integer large enough to be an
address (>= 2**44), else ``config`` (shapes, dtypes, names). A ``contains`` test directly followed
by a read of the same key counts as one lookup.

Limits: a cache imported by value into another module (``from m import CACHE``), a cache held
on instances, or one built in C is not seen; the module must look its caches up by name.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Any

import torch

_ADDRESS_MIN = 2**44


@dataclass
class CacheStats:
    """Lookups and hits of one cache over a trace, split by what the hit key held."""

    name: str
    lookups: int = 0
    hits: int = 0
    weight_hits: int = 0
    fresh_hits: int = 0
    config_hits: int = 0
    stale_hits: int = 0  # weight-keyed hits at a step's first lookup (the weight just moved)
    steps: int = 0
    _seen_in_step: bool = field(default=False, repr=False)

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    def describe(self) -> str:
        """``_W_CACHE: 3/8 hits over 4 steps (weight 3, fresh 0, config 0, stale 0)``."""
        return (
            f"{self.name}: {self.hits}/{self.lookups} hits over {self.steps} steps (weight "
            f"{self.weight_hits}, fresh {self.fresh_hits}, config {self.config_hits}, "
            f"stale {self.stale_hits})"
        )


def _flatten(key: Any, depth: int = 0) -> Iterator[Any]:
    if depth > 4:
        return
    if isinstance(key, (tuple, list, frozenset, set)):
        for k in key:
            yield from _flatten(k, depth + 1)
    elif isinstance(key, dict):
        for k, v in key.items():
            yield from _flatten((k, v), depth + 1)
    else:
        yield key


class CacheProbe:
    """The counters of one :func:`count_cache_hits` block. Call :meth:`begin_step` per step."""

    def __init__(self) -> None:
        self.stats: dict[str, CacheStats] = {}
        self._weights: list[torch.Tensor] = []
        self._weight_ints: set[int] = set()
        self._fresh_ints: set[int] = set()

    def track_weights(self, *tensors: torch.Tensor) -> None:
        """Tensors whose identity a legitimate (W1) cache key may hold."""
        self._weights += list(tensors)
        self._weight_ints |= {id(t) for t in tensors} | {t.data_ptr() for t in tensors}

    def track_fresh(self, *tensors: torch.Tensor) -> None:
        """Fresh per-step tensors (activations, grad_out ...), to recognize their id/address."""
        self._fresh_ints |= {id(t) for t in tensors} | {t.data_ptr() for t in tensors}

    def begin_step(self) -> None:
        for s in self.stats.values():
            s.steps += 1
            s._seen_in_step = False

    def kind_of(self, key: Any) -> str:
        """``weight`` / ``fresh`` / ``config`` for one lookup key (see the module docstring)."""
        weight = fresh = False
        for part in _flatten(key):
            if isinstance(part, torch.Tensor):
                if any(part is w for w in self._weights):
                    weight = True
                else:
                    fresh = True
            elif isinstance(part, int) and not isinstance(part, bool):
                if part in self._weight_ints:
                    weight = True
                elif part in self._fresh_ints or part >= _ADDRESS_MIN:
                    fresh = True
        return "fresh" if fresh else "weight" if weight else "config"

    def record(self, name: str, key: Any, hit: bool) -> None:
        s = self.stats.setdefault(name, CacheStats(name))
        first = not s._seen_in_step
        s._seen_in_step = True
        s.lookups += 1
        if not hit:
            return
        s.hits += 1
        kind = self.kind_of(key)
        setattr(s, f"{kind}_hits", getattr(s, f"{kind}_hits") + 1)
        if kind == "weight" and first:
            s.stale_hits += 1


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # tensors in a key: `==` is elementwise
        return False


def _counting_class(base: type) -> type:
    """A subclass of a mapping type that reports every lookup to ``self._probe``."""

    def note(self: Any, key: Any, hit: bool, *, contains: bool = False) -> None:
        pending = self.__dict__.get("_pending", _MISSING)
        self.__dict__["_pending"] = key if contains and hit else _MISSING
        if not contains and pending is not _MISSING and _same(pending, key):
            return  # `if k in c: return c[k]` is one lookup
        self._probe.record(self._name, key, hit)

    def counted(method: str, contains: bool = False) -> Callable[..., Any]:
        inner = getattr(base, method)

        def call(self: Any, key: Any, *rest: Any) -> Any:
            if self.__dict__.get("_busy"):  # e.g. a C ``get`` that calls ``__getitem__``
                return inner(self, key, *rest)
            self.__dict__["_busy"] = True
            try:
                note(self, key, base.__contains__(self, key), contains=contains)
                return inner(self, key, *rest)
            finally:
                self.__dict__["_busy"] = False

        return call

    methods = {m: counted(m) for m in ("__getitem__", "get", "setdefault")}
    methods["__contains__"] = counted("__contains__", contains=True)
    return type(f"Counting{base.__name__}", (base,), methods)


_MISSING = object()
_MAPPINGS = (dict, weakref.WeakKeyDictionary, weakref.WeakValueDictionary)


def _counting_copy(obj: Any, probe: CacheProbe, name: str) -> Any:
    cls = _counting_class(type(obj))
    if isinstance(obj, dict) and hasattr(obj, "default_factory"):
        proxy = cls(obj.default_factory, obj)
    else:
        proxy = cls(obj)
    proxy._probe, proxy._name = probe, name
    return proxy


def _counting_lru(fn: Any, probe: CacheProbe, name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        before = fn.cache_info().hits
        out = fn(*args, **kwargs)
        probe.record(name, (args, tuple(kwargs.items())), fn.cache_info().hits > before)
        return out

    return counted


def _holders(module: ModuleType) -> Iterator[tuple[Any, str, str]]:
    """(holder, attribute, display name) of every cache-like attribute the module defines."""
    for attr, value in list(vars(module).items()):
        if attr.startswith("__"):
            continue
        if isinstance(value, _MAPPINGS) or hasattr(value, "cache_info"):
            yield module, attr, f"{module.__name__}.{attr}"
        owned = getattr(value, "__module__", None) == module.__name__
        if owned and isinstance(value, (FunctionType, type)):
            for sub, inner in list(vars(value).items()):
                if isinstance(inner, _MAPPINGS) and not sub.startswith("__"):
                    yield value, sub, f"{module.__name__}.{attr}.{sub}"


@contextlib.contextmanager
def count_cache_hits(*modules: ModuleType) -> Iterator[CacheProbe]:
    """Count lookups and hits of the caches defined in ``modules`` inside the ``with`` block.

    Yields a :class:`CacheProbe`; ``probe.stats`` maps each cache's name to its
    :class:`CacheStats` (caches never looked up are listed with zero lookups). Everything is
    restored on exit, also on an exception; entries added meanwhile stay in the original dicts.
    """
    probe = CacheProbe()
    swapped: list[tuple[Any, str, Any, Any]] = []
    try:
        for module in modules:
            for holder, attr, name in _holders(module):
                orig = getattr(holder, attr)
                if isinstance(orig, _MAPPINGS):
                    new = _counting_copy(orig, probe, name)
                else:
                    new = _counting_lru(orig, probe, name)
                probe.stats[name] = CacheStats(name)
                setattr(holder, attr, new)
                swapped.append((holder, attr, orig, new))
        yield probe
    finally:
        for holder, attr, orig, new in reversed(swapped):
            setattr(holder, attr, orig)
            if isinstance(orig, _MAPPINGS):
                new.__dict__["_busy"] = True  # copying back is not a lookup
                orig.clear()
                orig.update(new)
