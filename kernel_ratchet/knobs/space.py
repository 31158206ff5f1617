"""The search space of one op: every knob of every source, counted and described.

Sources: the op's tunables file (its own convention, :mod:`.tunables`), what every kernel file
already has (:mod:`.discover`; a tunables file that is also a kernel file is read both ways),
and the knobs declared in ``ratchet.yaml`` (:mod:`.declared`). A knob counts when it has at
least one value besides its current one; the points are the product, over the knobs, of the
values each can take.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.knobs.discover import discover, parse_discovered, plain_kernels
from kernel_ratchet.knobs.model import Entry, KnobError
from kernel_ratchet.knobs.tunables import Tunables, entries_for_op, parse_tunables
from kernel_ratchet.knobs.unread import unread_autotuners

TUNABLES = "tunables"
KERNEL = "kernel"


@dataclass(frozen=True)
class FileSpace:
    """The knobs of one file, and how to read them back from a rewritten text."""

    rel: str
    source: str  # TUNABLES or KERNEL
    tunables: Tunables
    parse: Callable[[str], Tunables]

    @property
    def text(self) -> str:
        return self.tunables.text

    def entries(self, op: str) -> list[Entry]:
        """The entries with something to move for ``op``, in file order: a tunables file's of
        the kinds the op uses (:func:`.tunables.entries_for_op`), a kernel file's all (the op
        lists the file; its kernels the op never launches are left out by what it launched)."""
        t = self.tunables
        found = [e for e in t.entries.values() if t.knob_space(e) or t.entry_presets(e)]
        return entries_for_op(found, t, op) if self.source == TUNABLES else found


@dataclass(frozen=True)
class SearchSpace:
    """Every file's knobs; the declarations that matched nothing; files that cannot be read;
    the autotune configs the search cannot read (:mod:`.unread`)."""

    files: tuple[FileSpace, ...]
    unmatched: tuple[KnobDecl, ...] = ()
    problems: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()  # autotune decorators whose configs the search cannot read

    def knobs(self, op: str) -> list[tuple[str, str, list]]:
        """(entry key, knob, every value it can take) of each knob that can move."""
        out = []
        for fs in self.files:
            for e in fs.entries(op):
                for name, values in fs.tunables.knob_space(e).items():
                    cur = e.knobs[name].value
                    out.append((e.key, name, [cur, *[v for v in values if v != cur]]))
        return out

    def launched_sites(self, op: str, launched: set[str] | None) -> set[str] | None:
        """``launched`` (the kernels the op launched), or None (every site searched) when
        nothing was recorded or when it names no kernel of these files (a launch through a
        name the files do not use)."""
        if not launched:
            return None
        scoped = [e for fs in self.files for e in fs.entries(op) if e.scope]
        if scoped and not any(e.runs_with(launched) for e in scoped):
            return None
        return launched

    def presets(self, op: str) -> int:
        return sum(len(fs.tunables.entry_presets(e)) for fs in self.files for e in fs.entries(op))

    def empty(self, op: str) -> bool:
        return not self.knobs(op) and not self.presets(op)

    def describe(self, op: str) -> str:
        """``"3 knobs, 96 points (launch 2, autotune 1)"``."""
        knobs = self.knobs(op)
        points = math.prod(len(v) for *_, v in knobs) if knobs else 0
        kinds: dict[str, int] = {}
        for fs in self.files:
            for e in fs.entries(op):
                kind = "tunables" if fs.source == TUNABLES else e.cls
                kinds[kind] = kinds.get(kind, 0) + len(fs.tunables.knob_space(e))
        where = ", ".join(f"{k} {n}" for k, n in kinds.items() if n)
        text = f"{len(knobs)} knob{'s' * (len(knobs) != 1)}, {points:,} points ({where})"
        n = self.presets(op)
        return text + (f", {n} preset{'s' * (n != 1)}" if n else "")


def collect(
    sources: Mapping[str, str],
    kernel_source: Sequence[str],
    tunables: str | None = None,
    decls: Sequence[KnobDecl] = (),
) -> SearchSpace:
    """The search space over the texts ``sources`` (relative path -> text) of the kernel files
    ``kernel_source``, the tunables file ``tunables`` and the declarations ``decls``. A file
    that does not parse is named in ``problems`` (its knobs are not counted). Kernel files
    that are not Python (CUDA sources, a YAML of configs) hold no knob the search can find;
    a knob declared in one is a problem."""
    files, unmatched, problems = [], [], []
    python = [r for r in kernel_source if r.endswith(".py")]
    plain = plain_kernels(sources[r] for r in python if r in sources)
    for d in decls:
        if d.file in kernel_source and d.file not in python:
            problems.append(
                f"knob {d.name} is declared in {d.file}, which is not a Python file: a declared "
                "knob is an assignment, a launch keyword or an autotune config key of a "
                "Python kernel file; declare it where Python code sets the value, or move it "
                "by hand (ratchet validate)"
            )
    for rel in dict.fromkeys([*([tunables] if tunables else []), *python]):
        text = sources.get(rel)
        if text is None:  # a kernel file a round may create has nothing to move yet
            if rel == tunables:
                problems.append(f"{rel} cannot be read")
            continue
        try:
            if rel == tunables:
                files.append(FileSpace(rel, TUNABLES, parse_tunables(text), parse_tunables))
            if rel in kernel_source:
                found = discover(text, rel, decls, plain)
                parse = parse_discovered(rel, decls, plain)
                files.append(FileSpace(rel, KERNEL, found.tunables, parse))
                unmatched += found.unmatched
        except KnobError as exc:
            problems.append(f"{rel}: {exc}")
    unmatched += [d for d in decls if d.file not in kernel_source]
    unread = [u for r in python if r in sources for u in unread_autotuners(r, sources[r])]
    return SearchSpace(tuple(files), tuple(unmatched), tuple(problems), tuple(unread))


def read_sources(root: Path, rels: Sequence[str]) -> dict[str, str]:
    """The texts of the files ``rels`` under ``root`` that exist and read as UTF-8."""
    out = {}
    for rel in rels:
        try:
            out[rel] = (Path(root) / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return out


def nothing_to_move(op: str, kernel_source: Sequence[str], unread: Sequence[str] = ()) -> str:
    """Why a search of ``op`` cannot start, and how to declare knobs; ``unread``: the autotune
    decorators whose configs it cannot read (``SearchSpace.unread``)."""
    first = kernel_source[0] if kernel_source else "pkg/kernel.py"
    seen = (
        f"autotune configs it cannot read ({'; '.join(unread)}: it reads literal "
        "triton.Config lists and comprehensions over literal candidates)"
        if unread
        else "no @triton.autotune configs"
    )
    return (
        f"op {op!r} has nothing the search can move: {seen}, no kernel "
        f"launch with num_warps / num_stages / BLOCK_* arguments in {', '.join(kernel_source)}, "
        "no tunables file with a SEARCH_SPACE, and no knobs declared in ratchet.yaml. Declare "
        f"one under ops.{op}.knobs, e.g.\n"
        f"    knobs:\n      - name: BLOCK_SIZE\n        file: {first}\n"
        "        within: my_launcher   # optional: the function or kernel it lives in\n"
        "        values: [256, 512, 1024]\n"
        "(a module-level constant, an assignment in a function, a launch keyword or an "
        "autotune config key; see docs/search.md), or drive the campaign with "
        "--optimizer agent or manual"
    )
