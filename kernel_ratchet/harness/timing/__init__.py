"""Timing engines: how one callable is turned into a time in milliseconds.

An engine is chosen once per campaign and recorded in the manifest, so every round of a
campaign is timed the same way. Modules:

* :mod:`.engine` -- the contract every engine keeps (:class:`~.engine.TimingEngine`), its result
  (:class:`~.engine.Timing`) and the per-sample hooks (:class:`~.engine.SampleHooks`);
* :mod:`.perf_counter` -- ``perf_counter``: the host clock around a synchronized batch of calls
  (the only engine on the CPU);
* :mod:`.cuda_events` -- ``cuda_events``: CUDA events around one short timed call per sample,
  cold L2, clocks watched; built from the pure helpers and device probes of
  :mod:`.cuda_support`;
* :mod:`.registry` -- engines by name (``"module:attr"``, imported on first use) and
  :func:`~.registry.make_engine`.
"""
