"""``ratchet new-op``: an op's ``ratchet.yaml`` entry, and its focused test, from a few flags.

The entry is inserted as text at the end of the ``ops:`` block, so the file's comments and
other ops stay as written; a new ``ratchet.yaml`` gets the top-level keys too. The result is
validated by the profile loader before it replaces the file, and an op that exists already is
refused (a usage error): nothing is ever overwritten.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kernel_ratchet.errors import ProfileError, UsageError
from kernel_ratchet.profile.described_check import focused_command
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.on_path import packaged
from kernel_ratchet.profile.schema import BACKENDS, COMPILED_BACKENDS

#: A new ratchet.yaml's top level before ``ops:`` (``{package}``, ``{install}`` and ``{test}``
#: filled in).
HEADER = """\
project: "{project}"
package: {package}
install: "{install}"
full_test: "{test}"
campaign_root: .ratchet/campaigns
tips_root: ratchet-tips
ops:
"""

FOCUSED_TEST = '''\
"""Focused test of op {name}: every output and gradient against its reference, as described
in ratchet.yaml ({where})."""

from pathlib import Path

from kernel_ratchet.profile.focused import run


def test_{ident}_matches_its_reference():
    assert run("{name}", Path(__file__).resolve().parent) == 0
'''


#: The language written for each backend (``lang`` is free text; ``--lang`` overrides it).
LANGS: Mapping[str, str] = {
    "TRITON": "triton",
    "CUDA": "cuda",
    "CUTLASS": "cpp",
    "CUTEDSL": "python",
    "HIP": "hip",
    "CK": "cpp",
    "TILELANG": "python",
    "TORCH": "python",
}
#: Where an op's check runs without a GPU, for the backends whose kernels run on the CPU at
#: all; every other backend's kernels need the GPU.
CPU_RUNS: Mapping[str, str] = {
    "TRITON": "the Triton interpreter on the rehearsal shapes without a GPU",
    "TORCH": "plain PyTorch on the CPU on the rehearsal shapes without a GPU",
}


def backend_of(text: str) -> str:
    """``--backend``'s value in its canonical spelling (any case, as the profile loader
    reads it); UsageError listing the accepted names otherwise."""
    if text.upper() not in BACKENDS:
        raise UsageError(f"--backend {text!r} is not a backend; use one of {', '.join(BACKENDS)}")
    return text.upper()


def require_rebuild(backend: str, rebuild: str | None) -> None:
    """UsageError naming ``--rebuild`` for a compiled backend without one: new-op writes a
    repo-mode op, whose kernel is rebuilt in place after each change."""
    if backend in COMPILED_BACKENDS and not rebuild:
        raise UsageError(
            f"--backend {backend} is compiled: give the command that rebuilds its kernel after "
            "each change with --rebuild CMD (e.g. --rebuild 'pip install -e .' or 'make')"
        )


def where_checked(backend: str) -> str:
    """Where the op's focused check runs, as its generated test says it."""
    return CPU_RUNS.get(backend, f"on a GPU: {backend} kernels do not run on the CPU")


def next_steps(name: str, backend: str) -> str:
    """What to run after ``new-op``: a CPU rehearsal where the backend runs on the CPU."""
    if backend in CPU_RUNS:
        return f"`ratchet check --op {name}`, then `ratchet run --rehearse --op {name}`"
    return f"on a GPU machine, `ratchet check --op {name}`, then `ratchet run --op {name}`"


def parse_pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    """``["x=[M, N] bfloat16", ...]`` as ``{"x": "[M, N] bfloat16"}``; UsageError otherwise."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier() or not value.strip():
            raise UsageError(f"{flag} {item!r}: write it as NAME=VALUE, e.g. 'x=[M, N] bfloat16'")
        out[name.strip()] = value.strip()
    return out


def parse_value(text: str) -> Any:
    """A constant written on the command line: an int, a float (``1e-6`` too), true/false,
    null, a YAML list or mapping (``[1, 2]``, ``{a: 1}``), else the text itself."""
    t = text.strip()
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.lower() in ("null", "none", "~"):
        return None
    if t.startswith(("[", "{")):
        try:
            return yaml.safe_load(t)
        except yaml.YAMLError as exc:
            raise UsageError(f"{text!r} is not a YAML list or mapping ({exc})") from None
    return t


def parse_constants(items: Sequence[str], flag: str) -> dict[str, Any]:
    """``["eps=1e-6", ...]`` as ``{"eps": 1e-06}`` (values by :func:`parse_value`)."""
    return {k: parse_value(v) for k, v in parse_pairs(items, flag).items()}


def constants(
    args: Sequence[str],
    kwargs: Sequence[str],
    reference_kwargs: Sequence[str],
    roles: Sequence[str],
    measure: str | None,
) -> dict[str, Any]:
    """:func:`op_entry`'s ``args``, ``kwargs``, ``reference_kwargs``, ``roles`` and ``measure``
    from ``ratchet new-op``'s flags (UsageError for a malformed one)."""
    return {
        "args": [parse_value(a) for a in args],
        "kwargs": parse_constants(kwargs, "--kwarg"),
        "reference_kwargs": parse_constants(reference_kwargs, "--reference-kwarg"),
        "roles": parse_pairs(roles, "--role"),
        "measure": parse_pairs(measure.split(","), "--measure") if measure else None,
    }


def parse_shape(text: str) -> dict[str, Any]:
    """``"llama8b:M=16384,N=4096,dtype=bfloat16"`` as a shape entry (sizes as integers)."""
    label, sep, rest = text.partition(":")
    pairs = [p for p in rest.split(",") if p.strip()]
    if not sep or not label.strip() or not pairs:
        raise UsageError(
            f"--shape {text!r}: write it as LABEL:SYMBOL=INT,...[,dtype=NAME], "
            "e.g. 'llama8b:M=16384,N=4096,dtype=bfloat16'"
        )
    shape: dict[str, Any] = {"label": label.strip()}
    for k, v in parse_pairs(pairs, "--shape").items():
        shape[k] = int(v) if re.fullmatch(r"\d+", v) else v
    return shape


def module_file(root: Path, function: str) -> str:
    """The file, relative to the project ``root``, that holds ``function``'s module: found
    below the root itself or one level below it (``src/``, ``python/``), else the module's
    dotted path as a file name."""
    from kernel_ratchet.harness.import_roots import roots

    module = function.partition(":")[0]
    rel = Path(*module.split("."))
    for base in roots(str(root), module.split(".", 1)[0]):
        for path in (Path(base) / rel.with_suffix(".py"), Path(base) / rel / "__init__.py"):
            if path.is_file():
                return path.relative_to(root).as_posix()
    return rel.with_suffix(".py").as_posix()


def op_entry(
    *,
    function: str,
    reference: str,
    inputs: Mapping[str, str],
    outputs: Sequence[str],
    shapes: Sequence[Mapping[str, Any]],
    name: str,
    kernel_source: Sequence[str] = (),
    gradients: Sequence[str] = (),
    inplace_outputs: Sequence[str] = (),
    campaign_type: str = "memory",
    work: Mapping[str, str] | None = None,
    backend: str = "TRITON",
    lang: str | None = None,
    rebuild: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    reference_kwargs: Mapping[str, Any] | None = None,
    roles: Mapping[str, str] | None = None,
    measure: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``ops.<name>`` mapping; ``outputs`` default to ``y`` (``out`` beside an input
    ``y``), ``kernel_source`` to the function's module file,
    ``work`` (``{bytes: io}`` by default) is the work formula. ``args``, ``kwargs``: constants
    the function takes after its tensors; ``reference_kwargs``: the reference's; ``roles``: a
    training role per input; ``measure``: the quantity the op's campaigns decide on;
    ``rebuild``: the command that rebuilds a compiled backend's kernel. Each is left out when
    empty. ``lang`` defaults to the ``backend``'s language (:data:`LANGS`)."""
    module = function.partition(":")[0]
    entry: dict[str, Any] = {
        "kernel_source": list(kernel_source) or [module.replace(".", "/") + ".py"],
        "backend": backend,
        "lang": lang or LANGS.get(backend, backend.lower()),
        "campaign_type": campaign_type,
        "test": focused_command(name),
        "function": function,
        "reference": reference,
        "inputs": dict(inputs),
    }
    optional = {
        "rebuild": rebuild,
        "args": list(args),
        "kwargs": dict(kwargs or {}),
        "reference_kwargs": dict(reference_kwargs or {}),
    }
    entry.update({k: v for k, v in optional.items() if v})
    # by default y, or out beside an input y (whose gradient would share the name dy)
    entry["outputs"] = list(outputs) or ["out" if "y" in inputs else "y"]
    if roles:
        entry["roles"] = dict(roles)
    if measure:
        entry["measure"] = dict(measure)
    if gradients:
        entry["gradients"] = list(gradients)
    if inplace_outputs:
        entry["inplace_outputs"] = list(inplace_outputs)
    entry.update(work or {"bytes": "io"})
    entry["shapes"] = [dict(s) for s in shapes]
    return entry


def entry_text(name: str, entry: Mapping[str, Any], indent: str = "  ") -> str:
    """The entry as YAML under ``ops:``, indented by ``indent`` (lists of shapes one per line)."""
    step = max(2, len(indent.expandtabs(4)))
    body = yaml.safe_dump(
        {name: dict(entry)}, sort_keys=False, width=100, default_flow_style=None, indent=step
    )
    return "".join(f"{indent}{line}\n" for line in body.splitlines())


def _ops_block_end(lines: list[str]) -> tuple[int, str] | None:
    """Where the top-level ``ops:`` block ends (the index of the next top-level line) and the
    indentation of its entries; None when the file has no ``ops:`` key."""
    start = next((i for i, ln in enumerate(lines) if re.match(r"ops:\s*(#.*)?$", ln)), None)
    if start is None:
        return None
    end, indent = len(lines), None
    for i in range(start + 1, len(lines)):
        ln = lines[i]
        if ln.strip() and not ln.startswith((" ", "\t", "#")):
            end = i
            break
        m = re.match(r"(\s+)\S", ln)
        if m and indent is None and not ln.strip().startswith("#"):
            indent = m.group(1)  # the first entry's: an op's own keys sit deeper
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # keep the blank lines before the next key after the new entry
    return end, indent or "  "


def with_op(
    text: str | None, name: str, entry: Mapping[str, Any], root: Path, full_test: str | None = None
) -> str:
    """``text`` (a ratchet.yaml, None: none yet) with op ``name`` added at the end of ``ops:``;
    a new file's ``full_test`` is ``full_test`` (default: the op's focused test). Raises
    UsageError when the op exists already."""
    if text is None:
        test = full_test or entry["test"]
        header = HEADER.format(
            project=root.name, package=_package(entry), install=install_command(root), test=test
        )
        return header + entry_text(name, entry)
    data = yaml.safe_load(text) or {}
    if name in (data.get("ops") or {}):
        raise UsageError(
            f"op {name!r} exists already in ratchet.yaml; edit it there, or give another name"
        )
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    found = _ops_block_end(lines)
    if found is None:
        return "".join(lines) + "ops:\n" + entry_text(name, entry)
    end, indent = found
    return "".join(lines[:end]) + entry_text(name, entry, indent) + "".join(lines[end:])


def project_suite(profile: Path, writes_test: bool) -> str | None:
    """The acceptance suite of a new ratchet.yaml: the project's pytest suite where it has
    tests (or new-op writes its first); None (the op's own check) otherwise."""
    has_tests = (Path(profile).resolve().parent / "tests").is_dir()
    return "python -m pytest -q" if writes_test or has_tests else None


def suite_note(suite: str) -> str:
    """What new-op says of the ``full_test`` it wrote into a new ratchet.yaml."""
    return (
        f"full_test: `{suite}`, the suite `ratchet accept` runs once at the end of a campaign; "
        "narrow it in ratchet.yaml where the whole suite is long or needs a GPU the campaign's "
        "machine lacks"
    )


def install_command(root: Path) -> str:
    """How the project at ``root`` makes its package import from the checkout (what ``ratchet
    check`` prints, run in ``root``, when it does not): an editable install where it has a
    packaging file, else its root on the path of the shell that runs ``ratchet``."""
    if packaged(root):
        return "pip install -e ."
    return "export PYTHONPATH=$PWD"


def _package(entry: Mapping[str, Any]) -> str:
    return str(entry["function"]).partition(":")[0].split(".")[0]


def add_op(path: Path, name: str, entry: Mapping[str, Any], full_test: str | None = None) -> None:
    """Add op ``name`` to the ratchet.yaml at ``path`` (created when missing, its ``full_test``
    ``full_test``), validated by the profile loader first (ProfileError, the file untouched,
    when the entry is not valid)."""
    path = Path(path).resolve()
    text = path.read_text() if path.exists() else None
    new = with_op(text, name, entry, path.parent, full_test)
    trial = path.with_name(f".{path.name}.new")
    trial.write_text(new)
    try:
        load_profile(trial)
    except ProfileError as e:
        trial.unlink()
        raise ProfileError(
            f"op {name!r} was not added ({path.name} is unchanged): "
            + str(e).replace(str(trial), f"{path.name} with it").replace(trial.name, path.name)
        ) from None
    except BaseException:
        trial.unlink()
        raise
    os.replace(trial, path)


def refuse_taken(profile: Path, name: str, entry: Mapping[str, Any], test: Path | None) -> None:
    """UsageError, before anything is written, when op ``name`` is in ``profile`` (said first:
    its focused test is then likely there too) or the focused test file ``test`` exists."""
    if profile.exists():
        with_op(profile.read_text(), name, entry, profile.resolve().parent)
    if test is not None and test.exists():
        write_focused_test(test, name)


def write_focused_test(path: Path, name: str, backend: str = "TRITON") -> None:
    """The op's focused test file at ``path`` (saying where a ``backend`` op's check runs);
    UsageError when the file exists."""
    if path.exists():
        raise UsageError(f"{path} exists already; give another --test-file or --no-test-file")
    path.parent.mkdir(parents=True, exist_ok=True)
    ident = re.sub(r"\W", "_", name)
    path.write_text(FOCUSED_TEST.format(name=name, ident=ident, where=where_checked(backend)))
