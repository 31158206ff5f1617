"""Reading and rewriting a tunables file (``ratchet.yaml: ops.<op>.tunables``) as text.

Convention (what the search optimizer understands):

* **Config entries**: a module-level assignment whose value is a dict literal, possibly nested,
  with string keys and ``Name(...)`` calls as leaves, e.g.
  ``CONFIGS = {"bf16": {"large": GemmConfig(128, 256, 64, num_warps=8)}}``. Each call is an
  *entry* addressed as ``"CONFIGS/bf16/large"``; its knobs are the call's literal arguments.
  Positional arguments are named after the fields of the dataclass of that name when it is
  defined in the same file (its field defaults give the value of a knob not passed).
* **Module constants**: ``BLOCK_M = 16`` at module level, used as knobs when ``SEARCH_SPACE``
  names them; they form the entry ``"module"``.
* ``SEARCH_SPACE = {key: {knob: [values, ...]}}`` (optional): ``key`` is ``"*"``, a dict key of
  the entry path (``"bf16"``, ``"large"``), the whole path after the variable
  (``"bf16/large"``), the variable (``"WS16_CONFIGS"``: every entry of that table) or the
  entry's whole key (``"WS16_CONFIGS/bf16/large"``), in that order from least to most
  specific: more specific keys override less specific ones; an empty list removes a knob. Two
  tables whose entries share paths (one per kernel) keep apart by their variables. Without
  it, the space is derived from the dataclass fields: power-of-two neighbours for ints, the
  flip for bools.
* ``SEARCH_FAMILIES = {family: [knob, ...]}`` (optional) groups knobs for the stagnation rule;
  by default ``block_*`` knobs form the family ``"tile"`` and every other knob is its own.
* ``SEARCH_KINDS = {op: [first-level key, ...]}`` (optional): the kinds an op uses (without
  it, the first-level keys that share a ``_``-separated token with the op's name, if any).
* ``SEARCH_PRESETS = {key: [{knob: value, ...}, ...]}`` (optional): whole configurations tried
  on one entry in one round (a config sweep of one bucket).
* ``bucket_for(M, N, K) -> str`` (optional): which bucket a shape uses.

Rewriting replaces exactly one literal (or appends one ``knob=value`` argument to a call) and
keeps every other byte of the file.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernel_ratchet.knobs.model import (
    LITERALS,
    Entry,
    Knob,
    KnobError,
    Offsets,
    literal,
    neighbours,
    parse_python,
)

MODULE = "module"


@dataclass(frozen=True)
class Tunables:
    """A parsed tunables file."""

    text: str
    entries: dict[str, Entry]
    space: dict[str, dict[str, list[Any]]] | None
    families: dict[str, list[str]] = field(default_factory=dict)
    kinds: dict[str, list[str]] = field(default_factory=dict)
    presets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def knob_space(self, entry: Entry) -> dict[str, list[Any]]:
        """The values to try per knob of ``entry`` (declared, or derived from the fields)."""
        if self.space is None:
            if entry.key == MODULE:
                return {}
            return {
                k: neighbours(kn.value) for k, kn in entry.knobs.items() if neighbours(kn.value)
            }
        out: dict[str, list[Any]] = {}
        for key in _match_keys(entry):
            for knob, values in (self.space.get(key) or {}).items():
                if values:
                    out[knob] = list(values)
                else:
                    out.pop(knob, None)
        return {k: v for k, v in out.items() if k in entry.knobs}

    def entry_presets(self, entry: Entry) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for key in _match_keys(entry):
            out += [dict(p) for p in self.presets.get(key) or []]
        return out

    def family(self, knob: str) -> str:
        for fam, knobs in self.families.items():
            if knob in knobs:
                return fam
        return "tile" if knob.lower().startswith("block_") else knob


def _match_keys(entry: Entry) -> list[str]:
    if entry.key == MODULE:
        return ["*"]
    return ["*", *entry.path, "/".join(entry.path), entry.key.split("/")[0], entry.key]


def _dataclass_fields(tree: ast.Module) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields = []
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    if "ClassVar" in ast.unparse(st.annotation):
                        continue
                    ok, value = literal(st.value) if st.value is not None else (False, None)
                    fields.append((st.target.id, value if ok else None))
            out[node.name] = fields
    return out


def _assigned(node: ast.stmt) -> tuple[str | None, ast.AST | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        t = node.targets[0]
        return (t.id if isinstance(t, ast.Name) else None), node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        return node.target.id, node.value
    return None, None


def _call_entry(call: ast.Call, key: str, path: tuple[str, ...], classes, off) -> Entry:
    cls = ast.unparse(call.func).split(".")[-1]
    fields = classes.get(cls)
    knobs: dict[str, Knob] = {}
    if fields:
        for name, default in fields:
            if isinstance(default, LITERALS):
                knobs[name] = Knob(name, default, None)
    for i, arg in enumerate(call.args):
        if fields and i < len(fields) and not isinstance(arg, ast.Starred):
            ok, value = literal(arg)
            name = fields[i][0]
            if ok:
                knobs[name] = Knob(name, value, off.span(arg))
            else:
                knobs.pop(name, None)
    for kw in call.keywords:
        if kw.arg is None:
            continue
        ok, value = literal(kw.value)
        if ok:
            knobs[kw.arg] = Knob(kw.arg, value, off.span(kw.value))
        else:
            knobs.pop(kw.arg, None)
    last = [*call.args, *(k.value for k in call.keywords)]
    # after the last argument, or just inside ")" of an empty call
    insert_at = max(off.span(n)[1] for n in last) if last else off.span(call)[1] - 1
    return Entry(key, path, cls, knobs, insert_at, fields_known=bool(fields))


def _walk_dict(d: ast.Dict, var: str, path: tuple[str, ...], classes, off, out) -> None:
    for k, v in zip(d.keys, d.values, strict=True):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            continue
        p = (*path, k.value)
        if isinstance(v, ast.Dict):
            _walk_dict(v, var, p, classes, off, out)
        elif isinstance(v, ast.Call):
            key = "/".join((var, *p))
            out[key] = _call_entry(v, key, p, classes, off)


_SPACE_FORM = "SEARCH_SPACE = {key: {knob: [values, ...]}}, e.g. {'*': {'BLOCK_SIZE': [64, 128]}}"


def _check_space(space: Any) -> None:
    """Raise KnobError naming the part of ``SEARCH_SPACE`` that is not of its documented form."""
    if not isinstance(space, dict):
        raise KnobError(f"SEARCH_SPACE is a {type(space).__name__}; write {_SPACE_FORM}")
    for key, knobs in space.items():
        if not isinstance(key, str) or not isinstance(knobs, dict):
            raise KnobError(f"SEARCH_SPACE[{key!r}] is not a dict of knobs; write {_SPACE_FORM}")
        for knob, values in knobs.items():
            if not isinstance(knob, str) or not isinstance(values, list | tuple):
                raise KnobError(
                    f"SEARCH_SPACE[{key!r}][{knob!r}] is {values!r}, not a list of values; "
                    f"write {_SPACE_FORM}"
                )


def _check_value_types(space: dict[str, dict[str, list[Any]]], knobs: list[Knob]) -> None:
    """Raise KnobError for a ``SEARCH_SPACE`` value of another type than the knob's own (a
    text or a fraction for an integer): the search would write it, and fail the round."""
    current: dict[str, Any] = {kn.name: kn.value for kn in knobs}
    for key, by_knob in space.items():
        for knob, values in by_knob.items():
            if knob not in current:
                continue
            have = current[knob]
            for v in values:
                if type(v) is type(have) or (type(have) is float and type(v) is int):
                    continue
                raise KnobError(
                    f"SEARCH_SPACE[{key!r}][{knob!r}] holds {v!r} ({type(v).__name__}) where "
                    f"{knob} is {have!r} ({type(have).__name__}); list values of its type"
                )


def parse_tunables(text: str) -> Tunables:
    """Parse a tunables file. Raises KnobError when it is not valid Python or its
    ``SEARCH_*`` declarations are not literals."""
    tree = parse_python(text, "the tunables file")
    off = Offsets(text.encode())
    classes = _dataclass_fields(tree)
    entries: dict[str, Entry] = {}
    decl: dict[str, Any] = {}
    constants: dict[str, Knob] = {}
    for node in tree.body:
        name, value = _assigned(node)
        if name is None or value is None:
            continue
        if name.startswith("SEARCH_"):
            try:
                decl[name] = ast.literal_eval(value)
            except ValueError as exc:
                raise KnobError(f"{name} must be a literal (dicts, lists, numbers)") from exc
        elif isinstance(value, ast.Dict):
            _walk_dict(value, name, (), classes, off, entries)
        else:
            ok, lit = literal(value)
            if ok:
                constants[name] = Knob(name, lit, off.span(value))
    space = decl.get("SEARCH_SPACE")
    if space is not None:
        _check_space(space)
        wanted = {k for knobs in space.values() for k in knobs}
        known = set(constants).union(*(e.knobs for e in entries.values()))
        if wanted - known:
            raise KnobError(
                f"SEARCH_SPACE names {', '.join(sorted(wanted - known))}, which the file does "
                "not define (a module-level constant, or a field of a config it holds)"
            )
        _check_value_types(
            space, [*constants.values(), *(kn for e in entries.values() for kn in e.knobs.values())]
        )
        mod = {k: kn for k, kn in constants.items() if k in wanted}
        if mod:
            entries = {MODULE: Entry(MODULE, (), "", mod), **entries}
    return Tunables(
        text,
        entries,
        space,
        decl.get("SEARCH_FAMILIES") or {},
        decl.get("SEARCH_KINDS") or {},
        decl.get("SEARCH_PRESETS") or {},
    )


def set_knobs(
    text: str,
    entry_key: str,
    changes: dict[str, Any],
    parse: Callable[[str], Tunables] = parse_tunables,
) -> str:
    """``text`` with the knobs of one entry set to new values; all other bytes kept.

    ``parse`` reads the entries of the text (a tunables file by default; a kernel file's
    discovered knobs with :func:`kernel_ratchet.knobs.discover.discover`). A knob that the call
    does not pass is appended as ``knob=value``. Raises KnobError for an unknown entry or knob,
    or when the rewritten text does not read back the value.
    """
    for knob, value in sorted(changes.items()):
        t = parse(text)
        entry = t.entries.get(entry_key)
        if entry is None:
            raise KnobError(f"no knob entry {entry_key!r}; known: {sorted(t.entries)}")
        if knob not in entry.knobs:
            raise KnobError(f"{entry_key} has no movable knob {knob!r}")
        data = text.encode()
        current = entry.knobs[knob]
        lit = current.render(value).encode()
        if current.span is not None:
            data = data[: current.span[0]] + lit + data[current.span[1] :]
        else:
            at = entry.insert_at
            sep = b", " if data[at - 1 : at] != b"(" else b""
            data = data[:at] + sep + knob.encode() + b"=" + lit + data[at:]
        text = data.decode()
        check = parse(text).entries[entry_key].knobs[knob].value
        if check != value or type(check) is not type(value):
            raise KnobError(f"rewriting {entry_key}:{knob} did not give {value!r}")
    return text


def entries_for_op(entries: list[Entry], t: Tunables, op: str) -> list[Entry]:
    """Entries of the kinds the op uses: ``SEARCH_KINDS[op]``, else kinds sharing a name token
    with the op (``bf16_bwd`` for ``gemm_bf16``), else all. A kind is an entry's first key:
    ``bf16`` of ``CONFIGS/bf16/large``, or in a flat table the entry's own (``bf16_mm_large``
    of ``BUCKETS/bf16_mm_large``, ``fp8_mm_large`` left to an ``fp8`` op)."""
    kinds = {e.path[0] for e in entries if e.path}
    if not kinds:
        return entries
    if op in t.kinds:
        wanted = set(t.kinds[op])
    else:
        tokens = set(op.lower().split("_"))
        wanted = {k for k in kinds if tokens & set(k.lower().split("_"))} or kinds
    return [e for e in entries if not e.path or e.path[0] in wanted]
