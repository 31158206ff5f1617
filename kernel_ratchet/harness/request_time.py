"""Where a paired A/B's timing requests spent their time, said once the A/B is done.

Each ``time`` answer carries the worker's host seconds per stage (``stages_s``: building the
inputs and their digests, the engine's measurement, the spot checks, the checks after); the
parent adds the wall time of the whole request. A request whose inputs or spot checks take as
long as its measurement makes every round slower without making it more precise: the usual
cause is an adapter's ``make_case`` that draws random numbers on the CPU and copies them to the
device, or a reference computed on the CPU, and the summary says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The worker's stages, in the order a request runs them, and their names in the summary.
STAGES = {"inputs": "inputs", "measure": "measurement", "spot": "spot checks", "after": "after"}
#: Share of the requests' time spent on inputs and spot checks above which the summary advises.
HEAVY_SHARE = 0.4


@dataclass
class RequestTime:
    """Seconds of the A/B's timing requests, in all and per worker stage."""

    requests: int = 0
    wall_s: float = 0.0
    stages: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    devices: set[str] = field(default_factory=set)  # where the workers timed, when they said

    def add(self, payload: Mapping[str, Any] | None, wall_s: float) -> None:
        """One request: its answer's payload (its ``stages_s``, when given) and wall time."""
        self.requests += 1
        self.wall_s += wall_s
        if isinstance(device := (payload or {}).get("device"), str):
            self.devices.add(device)
        stages = (payload or {}).get("stages_s")
        for name, seconds in (stages if isinstance(stages, Mapping) else {}).items():
            if name in self.stages and isinstance(seconds, (int, float)):
                self.stages[name] += float(seconds)

    def summary(self) -> str | None:
        """One line: the requests' seconds by stage, and advice when inputs and spot checks
        take a large share; None before any request."""
        if not self.requests or self.wall_s <= 0:
            return None
        outside = max(0.0, self.wall_s - sum(self.stages.values()))
        parts = [f"{label} {self.stages[k]:.1f} s" for k, label in STAGES.items()]
        line = (
            f"A/B: {self.requests} timing requests took {self.wall_s:.1f} s "
            f"({self.wall_s / self.requests:.3f} s each): {', '.join(parts)}, "
            f"outside the worker {outside:.1f} s"
        )
        heavy = self.stages["inputs"] + self.stages["spot"]
        on_cpu = bool(self.devices) and self.devices <= {"cpu"}  # nothing to move to a device
        if heavy > HEAVY_SHARE * self.wall_s and not on_cpu:
            line += (
                f". Building inputs and spot checks took {heavy / self.wall_s:.0%} of it: an "
                "adapter whose make_case draws on the CPU and copies to the device, or whose "
                "reference runs on the CPU, slows every round; draw and compute on the device"
            )
        return line
