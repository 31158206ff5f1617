"""Counting the cache hits of a kernel module (kernel_ratchet.harness.cache_probe)."""

from __future__ import annotations

import functools
import types
from collections import OrderedDict

import torch

from kernel_ratchet.harness.cache_probe import count_cache_hits


def test_count_cache_hits_dicts_and_lru() -> None:
    module = types.ModuleType("probe_target")
    module.PLAIN, module.ORDERED = {}, OrderedDict()
    module.square = functools.lru_cache(maxsize=None)(lambda n: n * n)
    w, a = torch.ones(2), torch.ones(2)
    with count_cache_hits(module) as probe:
        probe.track_weights(w)
        probe.begin_step()
        key = (id(w), w._version)
        module.PLAIN[key] = 1
        found = module.PLAIN[key] if key in module.PLAIN else None  # noqa: SIM401 (one lookup)
        module.ORDERED[id(a)] = 2
        got = module.ORDERED.get(id(a))
        module.square(3), module.square(3)
    assert (found, got) == (1, 2)
    stats = probe.stats
    plain, ordered, lru = (stats[f"probe_target.{n}"] for n in ("PLAIN", "ORDERED", "square"))
    assert (plain.lookups, plain.weight_hits, plain.stale_hits) == (1, 1, 1)
    assert (ordered.hits, ordered.fresh_hits) == (1, 1)
    assert (lru.lookups, lru.hits, lru.config_hits) == (2, 1, 1)
    assert type(module.PLAIN) is dict and module.PLAIN  # restored, entries kept
    assert type(module.ORDERED) is OrderedDict and hasattr(module.square, "cache_info")
