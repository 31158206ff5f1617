"""The handoff profile (``ratchet.yaml``, SPEC section 3) as frozen records.

:mod:`kernel_ratchet.profile.loader` validates the YAML and builds these records; nothing
else constructs them from raw data. The constants below are the single source of the allowed
keys and values, so error messages and validation cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ratchet.errors import ProfileError, UnknownOpError
from kernel_ratchet.harness.timing.quantity import DEFAULT as DEFAULT_MEASURE
from kernel_ratchet.harness.timing.quantity import Measure
from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.profile.requires import Requirements

#: Top-level keys of ratchet.yaml, in the order the SPEC documents them. All are required.
REQUIRED_TOP_LEVEL_KEYS: tuple[str, ...] = (
    "project",
    "package",
    "install",
    "full_test",
    "campaign_root",
    "tips_root",
    "ops",
)
#: Optional top-level keys: ``measure`` (the project's default quantity, see
#: OpProfile.measure) and ``requires`` (what the ops need of the machine,
#: :mod:`kernel_ratchet.profile.requires`).
TOP_LEVEL_KEYS: tuple[str, ...] = (*REQUIRED_TOP_LEVEL_KEYS, "measure", "requires")

#: Keys of one ``ops.<name>`` entry; those after ``shapes`` are optional with explicit defaults.
OP_KEYS: tuple[str, ...] = (
    "kernel_source",
    "backend",
    "lang",
    "campaign_type",
    "test",
    "benchmark",
    "adapter",
    "shapes",
    "execution_mode",
    "rebuild",
    "tunables",
    "knobs",
    "weights",
    "measure",
    "test_shared",
    "allow_precision_drop",
    "test_gpu",
)
#: ``benchmark`` is optional (``ratchet bench`` runs it when given); ``adapter`` is not needed
#: when the op is described in the YAML (``function``, see :mod:`kernel_ratchet.profile.opdesc`).
REQUIRED_OP_KEYS: tuple[str, ...] = tuple(k for k in OP_KEYS[:8] if k != "benchmark")
OPTIONAL_OP_DEFAULTS: Mapping[str, object] = {
    "execution_mode": "repo",
    "rebuild": None,
    "tunables": None,
    "knobs": (),
    "weights": None,
    "measure": None,
    "test_shared": False,
    "allow_precision_drop": False,
    "test_gpu": True,
}

CAMPAIGN_TYPES: tuple[str, ...] = ("compute_fwd", "compute_fwd_bwd", "memory")
EXECUTION_MODES: tuple[str, ...] = ("repo", "workspace")

#: Known kernel backends (canonical upper-case spelling; the loader accepts any case).
BACKENDS: tuple[str, ...] = (
    "TRITON",
    "CUDA",
    "CUTLASS",
    "CUTEDSL",
    "HIP",
    "CK",
    "TILELANG",
    "TORCH",
)
#: Backends whose sources must be compiled after a change (SPEC section 3 recommendation
#: table): in repo mode they need a ``rebuild`` command, or the campaign uses workspace mode.
COMPILED_BACKENDS: tuple[str, ...] = ("CUDA", "CUTLASS", "HIP", "CK")

PRIMARY_METRICS: Mapping[str, str] = {
    "compute_fwd": "Forward TFLOPS",
    "compute_fwd_bwd": "Combined Step TFLOPS",
    "memory": "Forward GB/s",
}


@dataclass(frozen=True)
class OpProfile:
    """One ``ops.<name>`` entry. Paths are relative to the project root (validated inside it)."""

    name: str
    kernel_source: tuple[str, ...]
    backend: str
    lang: str
    campaign_type: str
    test: str
    benchmark: str | None
    adapter: str
    shapes: str
    execution_mode: str = "repo"
    rebuild: str | None = None
    tunables: str | None = None
    knobs: tuple[KnobDecl, ...] = ()  # declared knobs (kernel_ratchet.profile.knobs)
    #: shape label -> how often a training step runs that shape (the time-weighted effect of
    #: every paired decision); shapes not named weigh 1
    weights: Mapping[str, float] = field(default_factory=dict)
    rehearse_shapes: str | None = None
    #: what the campaign measures and decides on (the project's ``measure`` under the op's)
    measure: Measure = DEFAULT_MEASURE
    #: every round also runs the focused tests of the other ops listing a file it changed
    test_shared: bool = False
    #: the user's consent to candidates less precise than the incumbent, down to the op's
    #: correctness gate (e.g. an FP8 op whose dispatch moves a shape off its 16-bit fallback);
    #: every round still says where its precision fell
    allow_precision_drop: bool = False
    #: whether the focused test uses the GPU; ``false``: it runs with no GPU visible, beside
    #: the round's harness and A/B (:mod:`kernel_ratchet.campaign.rounds.measure`)
    test_gpu: bool = True

    @property
    def primary_metric(self) -> str:
        """The primary metric's name for this op's campaign type; a memory op described with
        gradients is decided on its step's bandwidth ("Step GB/s", as its rounds measure)."""
        try:
            name = PRIMARY_METRICS[self.campaign_type]
            described = self.adapter.startswith("described:")
            grads = described and json.loads(self.adapter[len("described:") :]).get("gradients")
            return "Step GB/s" if self.campaign_type == "memory" and grads else name
        except KeyError:
            raise ProfileError(
                f"op {self.name!r}: unknown campaign_type {self.campaign_type!r}; "
                f"set ops.{self.name}.campaign_type to one of {', '.join(CAMPAIGN_TYPES)}"
            ) from None

    @property
    def schema_name(self) -> str:
        """The CSV schema the op's adapter must report: ``"memory"`` or ``"gemm"``."""
        return "memory" if self.campaign_type == "memory" else "gemm"

    @property
    def is_compiled(self) -> bool:
        """Whether the backend needs a rebuild after a source change."""
        return self.backend.upper() in COMPILED_BACKENDS


@dataclass(frozen=True)
class Profile:
    """A validated ``ratchet.yaml``. ``path`` is the file, ``root`` the project root (its dir)."""

    path: Path
    root: Path
    project: str
    package: str
    install: str
    full_test: str
    campaign_root: str
    tips_root: str
    ops: Mapping[str, OpProfile]
    requires: Requirements | None = None
    measure: Measure = DEFAULT_MEASURE  # the project default of every op's ``measure``

    def op(self, name: str) -> OpProfile:
        """The op called ``name``; ProfileError listing the known ops when there is none."""
        try:
            return self.ops[name]
        except KeyError:
            known = ", ".join(sorted(self.ops)) or "(none)"
            raise UnknownOpError(
                f"{self.path}: ops.{name}: no such op; known ops: {known}. "
                f"Fix: pass one of them, or add an ops.{name} entry to {self.path.name}"
            ) from None

    @property
    def campaign_root_path(self) -> Path:
        """Absolute directory holding the campaigns (inside ``root``)."""
        return self.root / self.campaign_root

    @property
    def tips_root_path(self) -> Path:
        """Absolute directory holding the historical tips (inside ``root``)."""
        return self.root / self.tips_root
