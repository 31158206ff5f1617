"""Timing engines: how one callable is turned into a time in milliseconds.

An engine is chosen once per campaign and recorded in the manifest, so every round of a
campaign is timed the same way. Modules:

* :mod:`.engine` -- the contract every engine keeps (:class:`~.engine.TimingEngine`), its result
  (:class:`~.engine.Timing`) and the per-sample hooks (:class:`~.engine.SampleHooks`);
* :mod:`.perf_counter` -- ``perf_counter``: the host clock around a synchronized batch of calls
  (the only engine on the CPU);
* :mod:`.quantity` -- what a campaign measures (``kernel_time`` by CUDA-graph replay, cold or
  warm L2, or the eager ``step_time``), as ``ratchet.yaml`` states it;
* :mod:`.cuda_events` -- ``cuda_events``: CUDA events around one short timed call per sample,
  clocks watched, in the mode the quantity asks; built from the pure helpers and device probes
  of :mod:`.cuda_support` and the graphs and launch floor of :mod:`.graphs`;
* :mod:`.registry` -- engines by name (``"module:attr"``, imported on first use) and
  :func:`~.registry.make_engine`.
"""
