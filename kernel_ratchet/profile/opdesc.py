"""The ``ratchet.yaml`` keys of an op described without a Python adapter (SPEC section 3).

An op entry with ``function`` is described in the YAML alone: :func:`described_fields` checks
the description keys (:data:`~kernel_ratchet.harness.description.DESCRIPTION_KEYS`) and turns
them into the adapter spec the harness builds its adapter from. ``shapes`` and
``rehearse_shapes`` may be lists of ``{label, dtype?, <symbol>: int}`` written in place, for
any op; they become ``inline:`` shape-set specs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kernel_ratchet.harness.described_spec import described_spec, inline_spec
from kernel_ratchet.harness.description import DESCRIPTION_KEYS, Description
from kernel_ratchet.harness.symbolic import dtype_name
from kernel_ratchet.profile.problems import Problems, show

#: Keys an op entry may carry besides the SPEC's: the description and the rehearsal shapes.
EXTRA_OP_KEYS: tuple[str, ...] = (*DESCRIPTION_KEYS, "rehearse_shapes")


def is_described(data: Mapping[str, Any]) -> bool:
    """Whether the op entry describes its op in the YAML (it names a ``function``)."""
    return "function" in data


def described_fields(
    data: Mapping[str, Any], schema: str, prefix: str, problems: Problems
) -> str | None:
    """The ``described:`` adapter spec of an op entry, or None with a problem recorded."""
    if "adapter" in data:
        problems.add(
            f"{prefix}.adapter",
            "both adapter and function are given",
            "keep one: function (+ inputs, outputs, ...) describes the op, adapter names a class",
        )
        return None
    desc = {k: data[k] for k in DESCRIPTION_KEYS if k in data}
    try:
        spec = described_spec(desc, schema)
    except ValueError as exc:
        key, _, why = str(exc).partition(": ")
        problems.add(f"{prefix}.{key}", why or str(exc), "see docs/your-kernel.md for the form")
        return None
    _unbound_symbols(data, Description.from_dict(desc), prefix, problems)
    _shape_dtypes(data, prefix, problems)
    _work_given(data, schema, prefix, problems)
    return spec


def _work_given(data: Mapping[str, Any], schema: str, prefix: str, problems: Problems) -> None:
    """A compute campaign ranks TFLOP/s: an op that declares no ``flops`` would score every
    shape nan, found only when the baseline is measured."""
    if schema == "gemm" and not data.get("flops"):
        ctype = data.get("campaign_type", "compute_fwd")
        problems.add(
            f"{prefix}.flops",
            f"campaign_type {ctype} ranks TFLOP/s, and the op declares no flops: every shape "
            "would score nan",
            'give flops: "<an expression over the shape symbols>" (e.g. "2*M*N*K"), or use '
            "campaign_type: memory (ranked by bytes: io)",
        )


def _shape_dtypes(data: Mapping[str, Any], prefix: str, problems: Problems) -> None:
    """A described op's shape gives its tensors' ``dtype``: a name torch knows (a typo would
    first fail when the op runs, as if the kernel were wrong)."""
    for key, entry in _shape_entries(data):
        if entry.get("dtype") is None:
            continue
        try:
            dtype_name(str(entry["dtype"]))
        except ValueError as exc:
            why, _, fix = str(exc).partition("; ")
            problems.add(f"{prefix}.{key}", f"shape {entry.get('label')!r}: {why}", fix)


def _shape_entries(data: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(key, shape) for each shape written in place under ``shapes`` and ``rehearse_shapes``."""
    for key in ("shapes", "rehearse_shapes"):
        for entry in data.get(key) if isinstance(data.get(key), list) else []:
            if isinstance(entry, Mapping):
                yield key, entry


def _unbound_symbols(
    data: Mapping[str, Any], desc: Description, prefix: str, problems: Problems
) -> None:
    """Each shape written in place must give every symbol the op's tensors use: one it leaves
    out would take the Shape's default (M, N, B 1, K 0: an empty tensor that "passes")."""
    users: dict[str, list[str]] = {}
    for name, spec in [*desc.inputs.items(), *desc.output_specs.items()]:
        for sym in sorted(spec.symbols):
            users.setdefault(sym, []).append(name)
    for sym in sorted(desc.constant_symbols):
        users.setdefault(sym, []).append("a ${...} constant")
    for key, entry in _shape_entries(data):
        missing = [s for s in sorted(users) if s not in entry]
        if missing:
            used = "; ".join(f"{s} by {', '.join(users[s])}" for s in missing)
            problems.add(
                f"{prefix}.{key}",
                f"shape {entry.get('label')!r} does not give {', '.join(missing)} ({used})",
                f"add {', '.join(f'{s}: <int>' for s in missing)} to that shape",
            )


def shape_list(raw: Any, dotted: str, problems: Problems) -> str | None:
    """An ``inline:`` spec of shapes written as a list in the YAML, or None with a problem."""
    if not isinstance(raw, list) or not raw:
        problems.add(
            dotted,
            f"expected 'package.module:attr' or a non-empty list of shapes, got {show(raw)}",
            "write shapes as [{label: s1, M: 4096, N: 4096, dtype: bfloat16}, ...]",
        )
        return None
    labels = [e.get("label") if isinstance(e, Mapping) else None for e in raw]
    if len(set(map(str, labels))) != len(labels):
        problems.add(dotted, "shape labels repeat", "give every shape its own label")
        return None
    try:
        return inline_spec(raw)
    except ValueError as exc:
        problems.add(
            dotted, str(exc), "each shape is {label: ..., <symbol>: int, <flag>: bool, dtype: ...}"
        )
        return None
