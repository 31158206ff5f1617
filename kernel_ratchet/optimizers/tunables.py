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
  the entry path (``"bf16"``, ``"large"``) or the whole path after the variable
  (``"bf16/large"``); more specific keys override less specific ones; an empty list removes a
  knob. Without it, the space is derived from the dataclass fields: power-of-two neighbours for
  ints, the flip for bools.
* ``SEARCH_FAMILIES = {family: [knob, ...]}`` (optional) groups knobs for the stagnation rule;
  by default ``block_*`` knobs form the family ``"tile"`` and every other knob is its own.
* ``SEARCH_KINDS = {op: [first-level key, ...]}`` (optional): the kinds an op uses.
* ``SEARCH_PRESETS = {key: [{knob: value, ...}, ...]}`` (optional): whole configurations tried
  on one entry in one round (a config sweep of one bucket).
* ``bucket_for(M, N, K) -> str`` (optional): which bucket a shape uses.

Rewriting replaces exactly one literal (or appends one ``knob=value`` argument to a call) and
keeps every other byte of the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kernel_ratchet.optimizers.base import OptimizerError

MODULE = "module"
_LITERAL = (bool, int, float, str)


@dataclass(frozen=True)
class Knob:
    """One knob of one entry: its current value and where its literal sits (None: default)."""

    name: str
    value: Any
    span: tuple[int, int] | None  # byte offsets of the literal in the file


@dataclass(frozen=True)
class Entry:
    """One config entry (a call in a dict literal) or the module constants (``MODULE``)."""

    key: str  # "CONFIGS/bf16/large" or "module"
    path: tuple[str, ...]  # dict keys after the variable name: ("bf16", "large")
    cls: str
    knobs: dict[str, Knob]
    insert_at: int | None = None  # byte offset where a new keyword argument goes
    fields_known: bool = False

    @property
    def kind(self) -> str | None:
        return self.path[0] if len(self.path) > 1 else None

    @property
    def bucket(self) -> str | None:
        return self.path[-1] if self.path else None


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
                k: _neighbours(kn.value) for k, kn in entry.knobs.items() if _neighbours(kn.value)
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
    return ["*", *entry.path, "/".join(entry.path)]


def _neighbours(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int) and value >= 1:
        below = 1 << ((value - 1).bit_length() - 1) if value > 1 else 0  # largest 2^k < value
        above = 1 << value.bit_length()  # smallest 2^k > value
        return [v for v in (below, above) if v >= 1]
    return []


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False, None
    return isinstance(value, _LITERAL), value


class _Offsets:
    """Maps ast (line, utf-8 byte column) positions to byte offsets of the whole file."""

    def __init__(self, data: bytes) -> None:
        self.starts = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                self.starts.append(i + 1)

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.at(node.lineno, node.col_offset),
            self.at(node.end_lineno, node.end_col_offset),
        )


def _dataclass_fields(tree: ast.Module) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields = []
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    if "ClassVar" in ast.unparse(st.annotation):
                        continue
                    ok, value = _literal(st.value) if st.value is not None else (False, None)
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
            if isinstance(default, _LITERAL):
                knobs[name] = Knob(name, default, None)
    for i, arg in enumerate(call.args):
        if fields and i < len(fields) and not isinstance(arg, ast.Starred):
            ok, value = _literal(arg)
            name = fields[i][0]
            if ok:
                knobs[name] = Knob(name, value, off.span(arg))
            else:
                knobs.pop(name, None)
    for kw in call.keywords:
        if kw.arg is None:
            continue
        ok, value = _literal(kw.value)
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


def parse_tunables(text: str) -> Tunables:
    """Parse a tunables file. Raises OptimizerError when it is not valid Python or its
    ``SEARCH_*`` declarations are not literals."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise OptimizerError(f"the tunables file does not parse: {exc}") from exc
    off = _Offsets(text.encode())
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
                raise OptimizerError(f"{name} must be a literal (dicts, lists, numbers)") from exc
        elif isinstance(value, ast.Dict):
            _walk_dict(value, name, (), classes, off, entries)
        else:
            ok, lit = _literal(value)
            if ok:
                constants[name] = Knob(name, lit, off.span(value))
    space = decl.get("SEARCH_SPACE")
    if space is not None:
        wanted = {k for knobs in space.values() for k in knobs}
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


def set_knobs(text: str, entry_key: str, changes: dict[str, Any]) -> str:
    """``text`` with the knobs of one entry set to new literal values; all other bytes kept.

    A knob that the call does not pass is appended as ``knob=value``. Raises OptimizerError for
    an unknown entry or knob, or a knob whose current value is not a literal.
    """
    for knob, value in sorted(changes.items()):
        t = parse_tunables(text)
        entry = t.entries.get(entry_key)
        if entry is None:
            raise OptimizerError(f"no tunables entry {entry_key!r}; known: {sorted(t.entries)}")
        if knob not in entry.knobs:
            raise OptimizerError(f"{entry_key} has no literal knob {knob!r}")
        data = text.encode()
        lit = repr(value).encode()
        span = entry.knobs[knob].span
        if span is not None:
            data = data[: span[0]] + lit + data[span[1] :]
        else:
            at = entry.insert_at
            sep = b", " if data[at - 1 : at] != b"(" else b""
            data = data[:at] + sep + knob.encode() + b"=" + lit + data[at:]
        text = data.decode()
        check = parse_tunables(text).entries[entry_key].knobs[knob].value
        if check != value or type(check) is not type(value):
            raise OptimizerError(f"rewriting {entry_key}:{knob} did not give {value!r}")
    return text
