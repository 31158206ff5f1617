"""Find and load ``ratchet.yaml`` (SPEC section 3), validating everything up front.

Contract: :func:`load_profile` returns a :class:`~kernel_ratchet.profile.schema.Profile` or
raises one :class:`~kernel_ratchet.errors.ProfileError` that lists *every* problem found, one
per line, each naming the file, the key as a dotted path (``ops.gemm_bf16.campaign_type``) and
the fix. Nothing is guessed: the only defaults are ``execution_mode: repo``, ``rebuild: null``,
``tunables: null`` and no declared ``knobs``. Backend names are matched case-insensitively and
stored upper-case.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.timing.quantity import DEFAULT as DEFAULT_MEASURE
from kernel_ratchet.harness.timing.quantity import Measure
from kernel_ratchet.profile.knobs import parse_knobs
from kernel_ratchet.profile.measure import parse_measure
from kernel_ratchet.profile.opdesc import EXTRA_OP_KEYS, described_fields, is_described, shape_list
from kernel_ratchet.profile.opfields import flag, weights
from kernel_ratchet.profile.paths import inside_project, kernel_file
from kernel_ratchet.profile.problems import Problems, short, show
from kernel_ratchet.profile.requires import parse_requires
from kernel_ratchet.profile.schema import (
    BACKENDS,
    CAMPAIGN_TYPES,
    COMPILED_BACKENDS,
    EXECUTION_MODES,
    OP_KEYS,
    OPTIONAL_OP_DEFAULTS,
    REQUIRED_OP_KEYS,
    REQUIRED_TOP_LEVEL_KEYS,
    TOP_LEVEL_KEYS,
    OpProfile,
    Profile,
)

PROFILE_NAME = "ratchet.yaml"
_OP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_IMPORT_SPEC = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
#: Unknown keys named one by one per mapping; the rest are counted in one line.
_UNKNOWN_SHOWN = 10


def find_profile(start: str | Path) -> Path:
    """Walk up from ``start`` to the git root (or filesystem root) looking for ratchet.yaml.

    ``start`` may be a file or a directory. Returns the absolute path of the first
    ``ratchet.yaml`` found; raises ProfileError saying where it looked and how to fix it.
    """
    here = Path(start).resolve()
    if here.is_file():
        here = here.parent
    searched = []
    for directory in (here, *here.parents):
        searched.append(directory)
        candidate = directory / PROFILE_NAME
        if candidate.is_file():
            return candidate
        if (directory / ".git").exists():
            break
    raise ProfileError(
        f"no {PROFILE_NAME} in {here} or its parents up to "
        f"{searched[-1]}. Fix: at the target project's root, `ratchet new-op NAME --function "
        "pkg.module:fn --reference module:fn --input 'x=[M, N] bfloat16' --shape "
        "'big:M=4096,N=4096'` writes one with a focused test (`ratchet new-op --help`); or "
        f"write {PROFILE_NAME} by hand (kernel-ratchet's docs/your-kernel.md has a complete "
        "example), or pass its path with --profile"
    )


#: libyaml's parser when PyYAML was built with it (same safe constructors, tens of times faster
#: on large files), else the pure-Python one.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):  # type: ignore[misc, valid-type]
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {show(key)} (first on line {seen[key] + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.start + 1].hex()
        raise ProfileError(
            f"{path}: not UTF-8 text (byte {exc.start} is 0x{bad}). Fix: save {PROFILE_NAME} "
            "as UTF-8 text (it is binary, or written in another encoding such as Latin-1)"
        ) from None
    except OSError as exc:
        raise ProfileError(
            f"{path}: cannot be read ({exc}). Fix: check the path and its permissions"
        ) from exc
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(
            f"{where}: YAML syntax error: {problem}. "
            "Fix: correct the YAML at that line (indentation, quoting, a missing colon)"
        ) from exc


def _check_keys(
    data: Mapping[str, Any],
    allowed: tuple[str, ...],
    required: tuple[str, ...],
    prefix: str,
    problems: Problems,
) -> None:
    """Unknown keys (the first few named, the rest counted) and missing required ones."""
    unknown = [key for key in data if key not in allowed]
    for key in unknown[:_UNKNOWN_SHOWN]:
        near = difflib.get_close_matches(str(key)[:64], allowed, n=1, cutoff=0.75)
        problems.add(
            f"{prefix}{short(str(key))}",
            "unknown key",
            (f"did you mean {near[0]!r}? " if near else "")
            + f"remove or rename it; allowed keys here: {', '.join(allowed)}",
        )
    rest = len(unknown) - _UNKNOWN_SHOWN
    if rest > 0:
        problems.add(
            prefix.rstrip(".") or "(top level)",
            f"... and {rest} more unknown keys",
            f"remove or rename them; allowed keys here: {', '.join(allowed)}",
            times=rest,
        )
    for key in required:
        if key not in data:
            problems.add(f"{prefix}{key}", "required key is missing", f"add '{key}: ...'")


def _string(
    data: Mapping[str, Any], key: str, dotted: str, problems: Problems, *, optional: bool = False
) -> str | None:
    """The value of a string key, or None (with a problem recorded unless optional/absent)."""
    if key not in data:
        return None
    value = data[key]
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        what = "a non-empty string or null" if optional else "a non-empty string"
        problems.add(dotted, f"expected {what}, got {show(value)}", f"set {dotted} to {what}")
        return None
    return value.strip()


def _kernel_source(raw: Any, root: Path, dotted: str, problems: Problems) -> tuple[str, ...] | None:
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        problems.add(
            dotted,
            f"expected a path or a non-empty list of paths, got {show(raw)}",
            f"set {dotted} to the kernel file(s) a round may change",
        )
        return None
    out: list[str] = []
    ok = True
    for i, item in enumerate(items):
        key = f"{dotted}[{i}]" if isinstance(raw, list) else dotted
        if not isinstance(item, str) or not item.strip():
            problems.add(
                key, f"expected a file path, got {show(item)}", "write the path as a string"
            )
            ok = False
            continue
        norm = kernel_file(item.strip(), root, key, problems)
        if norm is None:
            ok = False
        elif norm in out:
            problems.add(key, f"{show(item)} is listed twice", "list each kernel file once")
            ok = False
        else:
            out.append(norm)
    return tuple(out) if ok else None


def _import_spec(data: Mapping[str, Any], key: str, dotted: str, problems: Problems) -> str | None:
    value = _string(data, key, dotted, problems)
    if value is not None and not _IMPORT_SPEC.match(value):
        problems.add(
            dotted,
            f"{show(value)} is not of the form 'package.module:name'",
            f"set {dotted} to 'package.module:name'",
        )
        return None
    return value


def _choice(
    data: Mapping[str, Any], key: str, dotted: str, choices: tuple[str, ...], problems: Problems
) -> str | None:
    if key not in data and key not in OPTIONAL_OP_DEFAULTS:
        return None  # already reported as a missing required key
    value = data.get(key, OPTIONAL_OP_DEFAULTS.get(key))
    if value not in choices:
        problems.add(
            dotted, f"{show(value)} is not allowed", f"set it to one of {', '.join(choices)}"
        )
        return None
    return value


def _backend(data: Mapping[str, Any], dotted: str, problems: Problems) -> str | None:
    value = _string(data, "backend", dotted, problems)
    if value is None:
        return None
    if value.upper() not in BACKENDS:
        problems.add(
            dotted, f"unknown backend {show(value)}", f"set it to one of {', '.join(BACKENDS)}"
        )
        return None
    return value.upper()


def _shapes(data: Mapping[str, Any], key: str, prefix: str, problems: Problems) -> str | None:
    """A shape-set spec: ``module:attr``, or a list written in place (``inline:``)."""
    if isinstance(data.get(key), list):
        return shape_list(data[key], f"{prefix}.{key}", problems)
    return _import_spec(data, key, f"{prefix}.{key}", problems)


def _described(data: Mapping[str, Any], prefix: str, problems: Problems) -> str | None:
    ctype = data.get("campaign_type")
    return described_fields(data, "memory" if ctype == "memory" else "gemm", prefix, problems)


def _needs_rebuild(
    fields: Mapping[str, Any], data: Mapping[str, Any], prefix: str, problems: Problems
) -> None:
    """A compiled backend edited in place (repo mode) must say how to rebuild it."""
    if (
        fields["backend"] in COMPILED_BACKENDS
        and fields["execution_mode"] == "repo"
        and data.get("rebuild") is None
    ):
        problems.add(
            f"{prefix}.rebuild",
            f"backend {fields['backend']} is compiled, execution_mode is repo and rebuild is null",
            "give the command that rebuilds the kernel after each change (rebuild: '...'), "
            "or set execution_mode: workspace",
        )


def _op(
    name: Any, data: Any, root: Path, problems: Problems, measure: Measure = DEFAULT_MEASURE
) -> OpProfile | None:
    prefix = f"ops.{short(str(name))}"
    if not isinstance(name, str) or not _OP_NAME.match(name):
        problems.add(
            prefix,
            f"op name {show(name)} is not a plain name",
            "use letters, digits, '_', '.' or '-' (it becomes part of a directory name)",
        )
        return None
    if not isinstance(data, Mapping):
        problems.add(
            prefix,
            f"expected a mapping of op keys, got {show(data)}",
            f"give {prefix} the keys {', '.join(REQUIRED_OP_KEYS)}",
        )
        return None
    n_before = problems.count
    described = is_described(data)
    required = tuple(k for k in REQUIRED_OP_KEYS if not (described and k == "adapter"))
    _check_keys(data, (*OP_KEYS, *EXTRA_OP_KEYS), required, prefix + ".", problems)
    ks = data.get("kernel_source")
    fields: dict[str, Any] = {
        "kernel_source": None
        if ks is None
        else _kernel_source(ks, root, f"{prefix}.kernel_source", problems),
        "backend": _backend(data, f"{prefix}.backend", problems),
        "campaign_type": _choice(
            data, "campaign_type", f"{prefix}.campaign_type", CAMPAIGN_TYPES, problems
        ),
        "execution_mode": _choice(
            data, "execution_mode", f"{prefix}.execution_mode", EXECUTION_MODES, problems
        ),
        "adapter": _described(data, prefix, problems)
        if described
        else _import_spec(data, "adapter", f"{prefix}.adapter", problems),
        "shapes": _shapes(data, "shapes", prefix, problems),
        "rehearse_shapes": _shapes(data, "rehearse_shapes", prefix, problems),
        "rebuild": _string(data, "rebuild", f"{prefix}.rebuild", problems, optional=True),
        "benchmark": _string(data, "benchmark", f"{prefix}.benchmark", problems, optional=True),
    }
    for key in ("lang", "test"):
        fields[key] = _string(data, key, f"{prefix}.{key}", problems)
    tunables = _string(data, "tunables", f"{prefix}.tunables", problems, optional=True)
    if tunables is not None:
        tunables = inside_project(tunables, f"{prefix}.tunables", problems, subdir=True)
    fields["tunables"] = tunables
    fields["knobs"] = parse_knobs(data.get("knobs"), prefix, fields["kernel_source"], problems)
    fields["weights"] = weights(data.get("weights"), f"{prefix}.weights", problems)
    fields["test_shared"] = flag(data.get("test_shared"), f"{prefix}.test_shared", problems)
    fields["allow_precision_drop"] = flag(
        data.get("allow_precision_drop"), f"{prefix}.allow_precision_drop", problems
    )
    fields["test_gpu"] = flag(data.get("test_gpu"), f"{prefix}.test_gpu", problems, True)
    fields["measure"] = parse_measure(data.get("measure"), f"{prefix}.measure", measure, problems)
    _needs_rebuild(fields, data, prefix, problems)
    if problems.count > n_before:
        return None
    return OpProfile(name=name, **fields)


def _validate(data: Any, path: Path) -> Profile:
    problems = Problems(path)
    if not isinstance(data, Mapping):
        problems.add(
            "(top level)",
            f"expected a mapping, got {type(data).__name__}",
            f"write the keys {', '.join(REQUIRED_TOP_LEVEL_KEYS)} at the top level "
            "(docs/your-kernel.md)",
        )
        problems.raise_if_any()
    _check_keys(data, TOP_LEVEL_KEYS, REQUIRED_TOP_LEVEL_KEYS, "", problems)
    top: dict[str, Any] = {
        k: _string(data, k, k, problems) for k in REQUIRED_TOP_LEVEL_KEYS if k != "ops"
    }
    if "requires" in data:
        top["requires"] = parse_requires(data["requires"], problems)
    measure = parse_measure(data.get("measure"), "measure", DEFAULT_MEASURE, problems)
    pkg = top.get("package")
    if pkg is not None and not all(p.isidentifier() for p in pkg.split(".")):
        problems.add(
            "package",
            f"{show(pkg)} is not an importable name",
            "give the name the op's code is imported by (a file such as 02-fused-softmax.py "
            "needs a module of valid name that loads it; see ops.<op>.function)",
        )
    for key in ("campaign_root", "tips_root"):
        if top.get(key) is not None:
            top[key] = inside_project(top[key], key, problems, subdir=True)
    ops: dict[str, OpProfile] = {}
    raw_ops = data.get("ops")
    if "ops" in data and (not isinstance(raw_ops, Mapping) or not raw_ops):
        problems.add(
            "ops",
            f"expected a non-empty mapping of ops, got {show(raw_ops)}",
            "add at least one op under ops: (docs/your-kernel.md)",
        )
    elif isinstance(raw_ops, Mapping):
        for name, op_data in raw_ops.items():
            op = _op(name, op_data, path.parent, problems, measure)
            if op is not None:
                ops[name] = op
    problems.raise_if_any()
    return Profile(path=path, root=path.parent, ops=ops, measure=measure, **top)  # type: ignore[arg-type]


def load_profile(path_or_dir: str | Path) -> Profile:
    """Load and validate a handoff profile.

    ``path_or_dir`` is the ratchet.yaml file or a directory from which :func:`find_profile`
    walks up. Raises ProfileError listing every problem (file, dotted key, fix), one per line.
    """
    p = Path(path_or_dir)
    if p.is_dir():
        p = find_profile(p)
    elif not p.exists():
        raise ProfileError(
            f"{p}: no such file. Fix: create {PROFILE_NAME} (docs/your-kernel.md) or pass its path"
        )
    path = p.resolve()
    return _validate(_read_yaml(path), path)
