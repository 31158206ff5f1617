"""Checks that the measurement method keeps its promises on this GPU.

* :mod:`.ab_trials`: the paired A/B decision run many times on the bundled bf16 GEMM with real
  worker processes: the kernel against itself (false accepts, false regression rollbacks), a
  planted 3% slowdown (never accepted, flagged SLOWER) and a planted 5% speedup (accepted);
* :mod:`.noise_probe`: the noise of one paired round under variants of the paired timing
  parameters, and which variant buys precision most cheaply;
* :mod:`.traces`: where the time and the noise of paired runs went, from their
  ``timings.jsonl`` traces.

``docs/measurement.md`` states the method, the targets and the numbers these checks gave.
"""
