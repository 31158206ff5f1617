"""``ops.<op>.knobs`` of ``ratchet.yaml``: knobs declared by hand, validated up front.

```yaml
knobs:
  - name: BLOCK_SIZE          # a constant, an assignment, a launch keyword or an autotune key
    file: my_pkg/norm.py      # one of the op's kernel_source files
    within: _norm_forward     # optional: the function or kernel it lives in
    values: [256, 512, 1024]  # literals to try; [] keeps the search away from it
```

Every problem is recorded on the profile's problem list with its dotted key and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.knobs.model import LITERALS
from kernel_ratchet.profile.paths import inside_project
from kernel_ratchet.profile.problems import Problems, show

KNOB_KEYS: tuple[str, ...] = ("name", "file", "within", "values")
REQUIRED_KNOB_KEYS: tuple[str, ...] = ("name", "file", "values")
EXAMPLE = "{name: BLOCK_SIZE, file: pkg/kernel.py, values: [64, 128, 256]}"


def _identifier(value: Any, dotted: str, problems: Problems) -> str | None:
    if isinstance(value, str) and value.isidentifier():
        return value
    problems.add(dotted, f"{show(value)} is not a Python name", "give the name as written")
    return None


def _one_value(v: Any) -> bool:
    """A scalar, or a non-empty list of scalars (e.g. the candidates an autotuner picks from)."""
    if isinstance(v, list):
        return bool(v) and all(isinstance(x, LITERALS) for x in v)
    return isinstance(v, LITERALS)


def _values(value: Any, dotted: str, problems: Problems) -> tuple[Any, ...] | None:
    if not isinstance(value, list) or not all(_one_value(v) for v in value):
        problems.add(
            dotted,
            "expected a list of numbers, booleans or strings (or of lists of them), got "
            f"{show(value)}",
            "list the values to try, e.g. [2, 4, 8] ([] keeps the search away from it)",
        )
        return None
    keys = {(type(v), tuple(v) if isinstance(v, list) else v) for v in value}
    if len(keys) != len(value):
        problems.add(dotted, f"{show(value)} repeats a value", "list each value once")
        return None
    return tuple(value)


def _file(value: Any, dotted: str, kernel_source: Sequence[str] | None, problems: Problems):
    if not isinstance(value, str) or not value.strip():
        problems.add(dotted, f"expected a file path, got {show(value)}", "name a kernel file")
        return None
    norm = inside_project(value.strip(), dotted, problems, subdir=True)
    if norm is not None and kernel_source is not None and norm not in kernel_source:
        problems.add(
            dotted,
            f"{show(value)} is not one of the op's kernel_source files",
            f"name one of {', '.join(kernel_source)} (a round may change only those), "
            "or add the file to kernel_source",
        )
        return None
    return norm


def _one(item: Any, dotted: str, kernel_source, problems: Problems) -> KnobDecl | None:
    if not isinstance(item, Mapping):
        problems.add(dotted, f"expected a mapping, got {show(item)}", f"write e.g. {EXAMPLE}")
        return None
    before = problems.count
    for key in item:
        if key not in KNOB_KEYS:
            problems.add(
                f"{dotted}.{key}", "unknown key", f"allowed keys here: {', '.join(KNOB_KEYS)}"
            )
    for key in REQUIRED_KNOB_KEYS:
        if key not in item:
            problems.add(f"{dotted}.{key}", "required key is missing", f"add '{key}: ...'")
    if problems.count > before:
        return None
    name = _identifier(item["name"], f"{dotted}.name", problems)
    within = item.get("within")
    if within is not None:
        within = _identifier(within, f"{dotted}.within", problems)
    file = _file(item["file"], f"{dotted}.file", kernel_source, problems)
    values = _values(item["values"], f"{dotted}.values", problems)
    if problems.count > before:
        return None
    return KnobDecl(name=name, file=file, values=values, within=within)


def parse_knobs(
    raw: Any, prefix: str, kernel_source: Sequence[str] | None, problems: Problems
) -> tuple[KnobDecl, ...] | None:
    """The declarations of ``<prefix>.knobs`` (None/absent: none), or None with the problems
    recorded. ``kernel_source`` (None: not known, its own problem) bounds the files named."""
    dotted = f"{prefix}.knobs"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.add(
            dotted, f"expected a list of knobs, got {show(raw)}", f"write e.g. [{EXAMPLE}]"
        )
        return None
    out: list[KnobDecl] = []
    for i, item in enumerate(raw):
        decl = _one(item, f"{dotted}[{i}]", kernel_source, problems)
        if decl is None:
            continue
        if any((d.name, d.file, d.within) == (decl.name, decl.file, decl.within) for d in out):
            problems.add(
                f"{dotted}[{i}]",
                f"{decl.name} in {decl.where} is declared twice",
                "declare each knob once",
            )
            continue
        out.append(decl)
    return tuple(out) if len(out) == len(raw) else None
