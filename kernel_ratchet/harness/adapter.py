"""The adapter protocol: what the quick harness needs to know about one op.

A target project writes one small :class:`Adapter` subclass per op and names it in
``ratchet.yaml`` as ``module:Class``. The harness (timing, correctness, CSV writing) lives in
kernel_ratchet, so it cannot drift between rounds. A complete example is
``examples/tiny_gemm/tiny_gemm/adapter.py``; ``ratchet check`` imports it and checks its
schema against the campaign type.

Contract
--------
* ``make_case(shape, seed, device)`` builds fresh inputs for one shape from ``seed`` (never
  zeros: random data of the op's real distribution). It returns any object (the *case*); the
  harness only hands it back to the adapter.
* ``forward(case)`` runs the op under test once and returns its output(s). This is what the
  forward timing measures, so it must do the whole forward and nothing else.
* ``backward(case)`` (only when ``has_backward``) runs the backward once from state prepared in
  ``make_case`` or in a previous ``forward`` call and returns the gradients. It is what the
  backward timing measures.
* ``outputs(case)`` runs forward (+ backward) and returns named tensors to check, e.g.
  ``{"out": ..., "da": ..., "db": ...}`` for a GEMM; ``reference(case)`` returns the same names
  computed independently in higher precision (plain PyTorch).
* ``checked_part(name, value, case)`` (optional) is the part of a returned output that
  ``outputs`` checks, when ``outputs`` checks less than the op returns (e.g. a few groups of a
  weight gradient too large for an fp32 reference): the checks of timed calls compare that part
  of what ``forward``/``backward`` returned with the reference. Default: the whole value.
* ``spot_reference(case)`` (optional) is what the secret spot checks of timed calls compare
  with, once per timing request. The correct result must pass against it at every output's
  threshold (so it must be that accurate), but it may be cheaper than ``reference``: e.g. the
  vendor library in the inputs' own precision for a bf16 GEMM (~50 dB against a 40 dB
  threshold). It must not call the kernel under test. Default: ``reference(case)``.
* ``flops(shape)`` / ``bytes_moved(shape)`` give (forward, backward) work counts; backward is 0
  for forward-only ops. TFLOPS and GB/s columns are derived from them.
* ``min_snr_db`` is the correctness threshold per output name (SPEC section 5: FP8 E4M3 25 dB,
  E5M2 20 dB, bf16/fp16 relative error 1e-2 = 40 dB, fp32 1e-4 = 80 dB). NaN never passes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kernel_ratchet.errors import ProfileError

#: SNR thresholds in dB, SPEC section 5. rel_err r <=> SNR = -20*log10(r).
SNR_E4M3 = 25.0
SNR_E5M2 = 20.0
SNR_FP4 = 10.0
SNR_BF16 = 40.0  # relative error 1e-2
SNR_FP32 = 80.0  # relative error 1e-4


@dataclass(frozen=True)
class Shape:
    """One problem size. ``B`` is a batch or group count (1 for a plain GEMM).

    ``params`` carries op-specific settings that are part of the shape's identity, e.g. the
    token distribution of a grouped GEMM (``{"dist": "skewed"}``). Memory-bound ops use ``M``
    and ``N`` for the tensor's rows and columns and leave ``K`` at 0. ``dtype`` (optional) is
    the element type the shape runs in (``"bfloat16"``); thresholds follow it.
    """

    label: str
    M: int
    N: int
    K: int = 0
    B: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str | None = None

    def __post_init__(self) -> None:
        if not self.label or "," in self.label or "\n" in self.label:
            raise ValueError(f"shape label must be non-empty without commas: {self.label!r}")
        for dim in ("M", "N", "K", "B"):
            value = getattr(self, dim)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"shape {self.label}: {dim} must be a non-negative int")
        object.__setattr__(self, "params", dict(self.params))

    def __hash__(self) -> int:
        return hash((self.label, self.M, self.N, self.K, self.B))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label, "B": self.B, "M": self.M, "N": self.N}
        d["K"] = self.K
        if self.params:
            d["params"] = dict(self.params)
        if self.dtype:
            d["dtype"] = self.dtype
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Shape:
        return cls(
            label=str(d["label"]),
            M=int(d["M"]),
            N=int(d["N"]),
            K=int(d.get("K", 0)),
            B=int(d.get("B", 1)),
            params=dict(d.get("params") or {}),
            dtype=str(d["dtype"]) if d.get("dtype") else None,
        )


class Adapter(ABC):
    """Base of every op adapter. Subclasses set the class attributes and implement the methods.

    Class attributes:
        schema: ``"gemm"`` or ``"memory"`` (see :mod:`kernel_ratchet.harness.csv_schema`).
        has_backward: whether ``backward`` is timed and gradients are checked.
        min_snr_db: threshold per output name in ``outputs``; a missing name uses ``default``.
        inplace_outputs: case fields the op writes its results into (an in-place backward
            that writes dX into dY): declared, so that a change of them is not taken for an
            input the candidate modified.
        forward_state: the backward starts from state of the last forward that is not a
            tensor of the case: after new values are written into the case's inputs, the
            harness runs forward again (untimed) before timing backward. A case that holds an
            autograd graph's output (a tensor with a ``grad_fn``) is treated so without it.
    """

    schema: ClassVar[str] = "gemm"
    has_backward: ClassVar[bool] = False
    min_snr_db: ClassVar[Mapping[str, float]] = {"default": SNR_BF16}
    inplace_outputs: ClassVar[tuple[str, ...]] = ()
    forward_state: ClassVar[bool] = False

    @abstractmethod
    def make_case(self, shape: Shape, seed: int, device: str) -> Any:
        """Fresh random inputs for ``shape`` drawn from ``seed`` on ``device``."""

    @abstractmethod
    def forward(self, case: Any) -> Any:
        """Run the op's forward once (timed)."""

    def backward(self, case: Any) -> Any:
        """Run the op's backward once (timed). Only called when ``has_backward``."""
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    @abstractmethod
    def outputs(self, case: Any) -> dict[str, Any]:
        """Named result tensors of forward (+ backward) for the correctness check."""

    @abstractmethod
    def reference(self, case: Any) -> dict[str, Any]:
        """The same names as ``outputs``, computed independently in higher precision."""

    def returned_names(self, phase: str) -> tuple[str, ...] | None:
        """The ``outputs``/``reference`` names of what ``forward`` (``phase`` "fwd") or
        ``backward`` ("bwd") returns, in order; None (the default) lets the checks of timed
        calls match them by name, ``out`` or position."""
        return None

    def checked_part(self, name: str, value: Any, case: Any) -> Any:
        """The part of the returned output ``name`` that :meth:`outputs` checks (see the
        contract); by default the whole ``value``."""
        return value

    def spot_reference(self, case: Any) -> dict[str, Any]:
        """What the spot checks of timed calls compare with (see the contract); by default
        :meth:`reference`."""
        return self.reference(case)

    @abstractmethod
    def flops(self, shape: Shape) -> tuple[float, float]:
        """(forward, backward) floating-point operations; backward 0 when there is none."""

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        """(forward, backward) minimum bytes read + written (memory-bound ops must override)."""
        return (0.0, 0.0)

    def threshold(self, name: str) -> float:
        """Minimum SNR in dB for output ``name``."""
        return float(self.min_snr_db.get(name, self.min_snr_db.get("default", SNR_BF16)))


#: Prefix of an adapter spec that carries an op described in ``ratchet.yaml`` (JSON after it),
#: and the module that builds its adapter (imported by name: it derives from this module).
DESCRIBED_PREFIX = "described:"
#: Prefix of a shape-set spec that carries the shapes themselves (a JSON list after it).
INLINE_PREFIX = "inline:"
_DESCRIBED_MODULE = "kernel_ratchet.harness.described"
_INLINE_MODULE = "kernel_ratchet.harness.described_spec"


def load_adapter(spec: str) -> Adapter:
    """Import ``module:Class`` and instantiate it, or build the adapter of a described op
    (``described:{...}``). Raises ProfileError with the fix. In the Triton interpreter
    (``TRITON_INTERPRET=1``) its gaps are filled first (:mod:`.interpreter`)."""
    if os.environ.get("TRITON_INTERPRET") == "1" and importlib.util.find_spec("triton"):
        importlib.import_module("kernel_ratchet.harness.interpreter").install()
    if spec.startswith(DESCRIBED_PREFIX):
        return importlib.import_module(_DESCRIBED_MODULE).adapter_from_spec(spec)
    if ":" not in spec:
        raise ProfileError(
            f"adapter {spec!r} is not of the form 'package.module:ClassName'; "
            "set ops.<op>.adapter in ratchet.yaml accordingly"
        )
    module_name, attr = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProfileError(
            f"adapter module {module_name!r} cannot be imported ({exc}); check ops.<op>.adapter "
            "in ratchet.yaml and that the project is installed editable"
        ) from exc
    try:
        cls = getattr(module, attr)
    except AttributeError as exc:
        raise ProfileError(
            f"module {module_name!r} has no attribute {attr!r}; check the class name in "
            "ops.<op>.adapter in ratchet.yaml"
        ) from exc
    # Check the class before calling it: an arbitrary class may need arguments or do work.
    if isinstance(cls, type) and issubclass(cls, Adapter):
        try:
            cls = cls()
        except TypeError as exc:
            raise ProfileError(
                f"{spec} cannot be instantiated without arguments ({exc}); implement every "
                "abstract method of Adapter and take no constructor arguments"
            ) from exc
    adapter = cls
    if not isinstance(adapter, Adapter):
        raise ProfileError(
            f"{spec} is not a kernel_ratchet.harness.adapter.Adapter subclass; "
            "derive the class from Adapter"
        )
    return adapter


def load_shapes(spec: str) -> list[Shape]:
    """Import ``module:attr`` naming a list of Shape (or a callable returning one), or read
    the shapes written in an ``inline:[...]`` spec."""
    if spec.startswith(INLINE_PREFIX):
        return _checked(spec, importlib.import_module(_INLINE_MODULE).inline_shapes(spec))
    if ":" not in spec:
        raise ProfileError(f"shapes {spec!r} is not of the form 'package.module:attr'")
    module_name, attr = spec.split(":", 1)
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ProfileError(f"shape set {spec!r} cannot be loaded ({exc})") from exc
    shapes = obj() if callable(obj) else obj
    try:
        out = [s if isinstance(s, Shape) else Shape.from_dict(s) for s in shapes]
    except (KeyError, ValueError, TypeError) as exc:
        raise ProfileError(
            f"shape set {spec!r} holds a malformed shape ({type(exc).__name__}: {exc}); each "
            "entry must be a Shape or a dict with label, M, N (K, B, params optional)"
        ) from exc
    return _checked(spec, out)


def _checked(spec: str, out: list[Shape]) -> list[Shape]:
    """``out`` when its labels are unique and it is not empty; ProfileError otherwise."""
    labels = [s.label for s in out]
    dup = sorted({label for label in labels if labels.count(label) > 1})
    if dup:
        raise ProfileError(f"shape set {spec!r} has duplicate labels: {dup}")
    if not out:
        raise ProfileError(f"shape set {spec!r} is empty")
    return out
