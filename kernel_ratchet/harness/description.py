"""The description of an op written in ``ratchet.yaml`` alone (no Python adapter).

Contract: :meth:`Description.from_dict` takes the op entry's description keys (see
:data:`DESCRIPTION_KEYS`) and returns a frozen :class:`Description`, or raises ValueError whose
message names the key and says what to write. :mod:`kernel_ratchet.harness.described` builds
the adapter from it; the profile loader validates it with the same function, so ``ratchet
check`` and the worker cannot disagree.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.harness import shape_values
from kernel_ratchet.harness.symbolic import (
    SHAPE_DTYPE,
    TensorSpec,
    default_snr_db,
    dtype_name,
    expression_symbols,
)

#: The keys of an ``ops.<name>`` entry that describe the op (``function`` makes it described).
DESCRIPTION_KEYS: tuple[str, ...] = (
    "function",
    "reference",
    "inputs",
    "args",
    "kwargs",
    "reference_kwargs",
    "outputs",
    "gradients",
    "inplace_outputs",
    "tolerance",
    "flops",
    "bytes",
    "roles",
    "reference_dtype",
)
REQUIRED_DESCRIPTION_KEYS: tuple[str, ...] = ("function", "reference", "inputs", "outputs")
#: The work formula that counts the bytes of every input and output once.
IO = "io"
REFERENCE_DTYPES: tuple[str, ...] = ("float32", "float64", "input")
ROLES: tuple[str, ...] = ("weight", "activation", "grad_out", "scale", "routing")
_CALLABLE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NAME = re.compile(r"^[A-Za-z_]\w*$")


def _callable(d: Mapping[str, Any], key: str) -> str:
    value = d.get(key)
    if not isinstance(value, str) or not _CALLABLE.match(value):
        module = value.partition(":")[0] if isinstance(value, str) else ""
        if module and not all(p.isidentifier() for p in module.split(".")):
            raise ValueError(
                f"{key}: {module!r} is not a name Python can import (a file such as "
                "02-fused-softmax.py is not a module); rename the file, or import it from a "
                "small module of valid name (importlib.util.spec_from_file_location) and name "
                "that one here, keeping the original file in kernel_source"
            )
        raise ValueError(f"{key}: expected '[package.]module:callable', got {value!r}")
    return value


def _names(d: Mapping[str, Any], key: str, allowed: set[str] | None = None) -> tuple[str, ...]:
    value = d.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and _NAME.match(v) for v in value):
        raise ValueError(f"{key}: expected a list of names, got {value!r}")
    if allowed is not None:
        bad = [v for v in value if v not in allowed]
        if bad:
            raise ValueError(f"{key}: {bad} are not among {sorted(allowed)}")
    return tuple(value)


def _tensors(value: Any, key: str) -> dict[str, TensorSpec]:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"{key}: expected a mapping of name: '[M, N] bfloat16', got {value!r}")
    out = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{key}: {name!r} is not a plain name")
        try:
            out[name] = TensorSpec.parse(text)
        except ValueError as exc:
            raise ValueError(f"{key}.{name}: {exc}") from None
    return out


def _work(value: Any, key: str, io_ok: bool) -> tuple[str | None, str | None]:
    """(forward, backward) expressions; a plain string is the forward."""
    if value is None:
        return None, None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        pair: tuple[Any, Any] = (str(value), None)
    elif isinstance(value, Mapping) and set(value) <= {"fwd", "bwd"} and value:
        pair = (value.get("fwd"), value.get("bwd"))
        pair = tuple(None if v is None else str(v) for v in pair)  # type: ignore[assignment]
    else:
        raise ValueError(f"{key}: expected an expression or {{fwd: ..., bwd: ...}}, got {value!r}")
    for expr in pair:
        if expr is not None and not (io_ok and expr == IO):
            try:
                expression_symbols(expr)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
    return pair


@dataclass(frozen=True)
class Description:
    """A validated op description; see the module docstring and docs/your-kernel.md."""

    function: str
    reference: str
    inputs: Mapping[str, TensorSpec]
    outputs: tuple[str, ...]
    output_specs: Mapping[str, TensorSpec]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    reference_kwargs: Mapping[str, Any]
    gradients: tuple[str, ...]
    inplace_outputs: tuple[str, ...]
    tolerance: Mapping[str, float]
    flops: tuple[str | None, str | None]
    bytes: tuple[str | None, str | None]
    roles: Mapping[str, str]
    reference_dtype: str

    @property
    def grad_names(self) -> dict[str, str]:
        """Checked gradient name (``d<input>``) -> input name."""
        return {f"d{name}": name for name in self.gradients}

    @property
    def grad_out_names(self) -> dict[str, str]:
        """Case field of each forward output's incoming gradient (``d<output>``) -> output."""
        return {f"d{name}": name for name in self.outputs} if self.gradients else {}

    @property
    def symbols(self) -> set[str]:
        specs = [*self.inputs.values(), *self.output_specs.values()]
        return set().union(*(s.symbols for s in specs)) | self.constant_symbols

    @property
    def constant_symbols(self) -> set[str]:
        """The symbols of the ``"${expr}"`` constants (:mod:`.shape_values`)."""
        values = [*self.args, *self.kwargs.values(), *self.reference_kwargs.values()]
        return shape_values.symbols(values)

    @property
    def uses_shape_dtype(self) -> bool:
        specs = [*self.inputs.values(), *self.output_specs.values()]
        return any(s.dtype == SHAPE_DTYPE for s in specs)

    @property
    def gathered(self) -> dict[str, str]:
        """Output -> the input its indices select from (``| gathers=x``)."""
        return {n: s.marks.gathers for n, s in self.output_specs.items() if s.marks.gathers}

    def threshold(self, name: str, dtype: str | None) -> float:
        """SNR threshold (dB) of output ``name`` computed in ``dtype``: by name, then by dtype,
        then the SPEC value of the dtype (bf16 when unknown)."""
        if name in self.tolerance:
            return self.tolerance[name]
        if dtype is not None:
            return self.tolerance.get(dtype, default_snr_db(dtype))
        return self.tolerance.get("default", default_snr_db("bfloat16"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Description:
        """Validate the description keys of one op entry; ValueError naming key and fix."""
        missing = [k for k in REQUIRED_DESCRIPTION_KEYS if k not in d]
        if missing:
            raise ValueError(f"{', '.join(missing)}: required for an op described by 'function'")
        inputs = _tensors(d["inputs"], "inputs")
        raw_out = d["outputs"]
        specs = _tensors(raw_out, "outputs") if isinstance(raw_out, Mapping) else {}
        outputs = tuple(specs) or _names(d, "outputs")
        if not outputs:
            raise ValueError("outputs: name at least one output of the function")
        gradients = _names(d, "gradients", set(inputs))
        grad_outs = {f"d{o}" for o in outputs} if gradients else set()
        clash = sorted(grad_outs & set(inputs))
        if clash:
            raise ValueError(f"inputs: {clash} clash with the incoming gradients' names")
        desc = cls(
            function=_callable(d, "function"),
            reference=_callable(d, "reference"),
            inputs=inputs,
            outputs=outputs,
            output_specs=specs,
            args=_constants(d, "args"),
            kwargs=_mapping(d, "kwargs"),
            reference_kwargs=_mapping(d, "reference_kwargs"),
            gradients=gradients,
            inplace_outputs=_names(d, "inplace_outputs", set(inputs) | grad_outs),
            tolerance=_tolerance(d.get("tolerance"), {*outputs, *(f"d{g}" for g in gradients)}),
            flops=_work(d.get("flops"), "flops", io_ok=False),
            bytes=_work(d.get("bytes"), "bytes", io_ok=True),
            roles=_roles(d.get("roles"), set(inputs)),
            reference_dtype=str(d.get("reference_dtype", "float32")),
        )
        _check_gathers(inputs, specs)
        _check_constants(desc)
        if desc.reference_dtype not in REFERENCE_DTYPES:
            raise ValueError(f"reference_dtype: use one of {', '.join(REFERENCE_DTYPES)}")
        return desc


def _check_gathers(inputs: Mapping[str, TensorSpec], outputs: Mapping[str, TensorSpec]) -> None:
    """``gathers=`` only on an output, naming an input it can index along the last dimension:
    of the input's rank (top-k, argsort) or one less (argmax)."""
    for name, spec in inputs.items():
        if spec.marks.gathers:
            raise ValueError(f"inputs.{name}: 'gathers=' is for an integer output, not an input")
    for name, spec in outputs.items():
        src = spec.marks.gathers
        if src is None:
            continue
        if src not in inputs:
            raise ValueError(
                f"outputs.{name}: gathers={src} names no input (inputs: {', '.join(inputs)})"
            )
        rank, of = len(spec.dims), len(inputs[src].dims)
        if not of or rank not in (of, of - 1):
            raise ValueError(
                f"outputs.{name}: [{_dims(spec)}] cannot index {src} "
                f"[{_dims(inputs[src])}] along its last dimension: give it {src}'s "
                f"rank (top-k, argsort) or one less (argmax)"
            )


def _dims(spec: TensorSpec) -> str:
    return ", ".join(map(str, spec.dims))


def _constants(d: Mapping[str, Any], key: str) -> tuple[Any, ...]:
    """Positional constants (numbers, strings, booleans, null) given after the inputs."""
    value = d.get(key) or []
    if not isinstance(value, list) or not all(
        v is None or isinstance(v, (bool, int, float, str)) for v in value
    ):
        raise ValueError(
            f"{key}: expected a list of constants passed after the inputs, e.g. [1.0e-6], "
            f"got {value!r}"
        )
    return tuple(value)


def _mapping(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = d.get(key) or {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{key}: expected a mapping of keyword: value, got {value!r}")
    return dict(value)


def _tolerance(value: Any, names: set[str]) -> dict[str, float]:
    """dB per dtype name, per output name or ``default``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"tolerance: expected a mapping of dtype or output: dB, got {value!r}")
    out: dict[str, float] = {}
    for key, db in value.items():
        if not isinstance(db, (int, float)) or isinstance(db, bool):
            raise ValueError(f"tolerance.{key}: expected a number of dB, got {db!r}")
        if key in names or key == "default":
            out[key] = float(db)
        else:
            try:
                out[dtype_name(str(key))] = float(db)
            except ValueError:
                raise ValueError(
                    f"tolerance.{key}: neither a dtype nor an output ({sorted(names)})"
                ) from None
    return out


def _roles(value: Any, inputs: set[str]) -> dict[str, str]:
    roles = dict(value or {})
    for name, role in roles.items():
        if name not in inputs or role not in ROLES:
            raise ValueError(
                f"roles.{name}: name an input ({sorted(inputs)}) with a role of {', '.join(ROLES)}"
            )
    return roles


def reference_call_problem(ref: Any, d: Description) -> str | None:
    """Why ``reference(*inputs, **reference_kwargs)`` does not fit the reference's signature,
    with where its constants go; None when it fits or the signature cannot be read."""
    try:
        sig = inspect.signature(ref)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*d.inputs, **dict.fromkeys(d.reference_kwargs))
    except TypeError as exc:
        given = ", ".join([*d.inputs, *(f"{k}=..." for k in d.reference_kwargs)])
        return (
            f"the reference {d.reference} cannot be called as reference({given}): {exc}. The "
            "op's args and kwargs go to its function only: give the reference its constants "
            "with reference_kwargs in ratchet.yaml (ratchet new-op: --reference-kwarg NAME=VALUE)"
        )
    return None


def _check_constants(desc: Description) -> None:
    """ValueError naming the key of a ``"${expr}"`` constant that is not arithmetic."""
    named = [
        *((f"args[{i}]", v) for i, v in enumerate(desc.args)),
        *((f"kwargs.{k}", v) for k, v in desc.kwargs.items()),
        *((f"reference_kwargs.{k}", v) for k, v in desc.reference_kwargs.items()),
    ]
    for key, value in named:
        try:
            shape_values.symbols([value])
        except ValueError as exc:
            raise ValueError(
                f"{key}: {exc}; a constant that is not a number per shape (a list such as "
                "[N], a tuple) is built by a small wrapper function that takes the tensors and "
                "passes it on (docs/your-kernel.md)"
            ) from None
