"""The built-in ``search`` optimizer: offline coordinate search over the op's knobs.

The knobs (:mod:`kernel_ratchet.knobs.space`) come from the op's tunables file (see
:mod:`kernel_ratchet.knobs.tunables` for its convention), from what its kernel files already
have (``@triton.autotune`` configs, ``num_warps`` / ``num_stages`` / ``BLOCK_*`` launch
arguments: :mod:`kernel_ratchet.knobs.discover`) and from ``ops.<op>.knobs`` in
``ratchet.yaml``. Each round is one move on one entry (a shape bucket, an autotune config, a
launch): one knob set to one value, one structural switch flipped, or one declared preset (a
config sweep of one bucket, which the rules count as one round). The change is the rewritten
file text; the engine measures and decides. An op with nothing to move is refused before its
campaign starts (:meth:`SearchOptimizer.check_ready`).

Order (deterministic): the tunables file's entries first, those whose bucket holds the least
efficient shape of the latest analysis first (then the bucket with more shapes, then file
order); then the kernel files' entries in file order; within an entry, knobs in space order,
values nearest to the current one first. A verified-ineffective direction, or one whose
candidate failed in its worker (a crash, a compile error, a wrong output), is
never proposed again, nor is undoing the last accepted move (its old value lost that round's
paired A/B; after a later acceptance it may be tried again); after two rollbacks in one knob
family since the last acceptance, that family moves behind every other one (stagnation).
``None`` when every move is spent.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
import types
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.knobs.model import Computed
from kernel_ratchet.knobs.space import (
    TUNABLES,
    FileSpace,
    SearchSpace,
    collect,
    nothing_to_move,
    read_sources,
)
from kernel_ratchet.knobs.tunables import MODULE, Entry, Tunables, entries_for_op, set_knobs
from kernel_ratchet.optimizers.base import Optimizer, OptimizerContext, OptimizerError, Proposal
from kernel_ratchet.profile.schema import OpProfile

#: Why a knob family might help (the hypothesis is stated before the change).
RATIONALE = {
    "tile": "a different tile shape changes the work per program, the operand reuse and the "
    "number of programs",
    "num_stages": "a different pipeline depth trades shared memory for hidden load latency",
    "num_warps": "a different warp count changes the parallelism per program and the "
    "registers per thread",
    "group_m": "a different grouped-M swizzle changes the L2 reuse of the operand panels",
    "split_k": "splitting K adds programs when the output has too few tiles to fill the GPU",
    "persistent": "persistent programs amortise launch and tile set-up over many tiles",
    "use_tma": "TMA loads move tiles with the copy engine instead of per-thread loads",
    "preset": "a whole configuration known to suit this bucket on other GPUs",
}
STAGNATION_ROLLBACKS = 2


def _narrowing(changes: Mapping[str, Any]) -> str:
    """Why narrowing an autotuner's candidate list might help."""
    (value,) = changes.values()
    return (
        f"the autotuner then picks among {value!r} only: its own benchmark may pick a "
        "candidate that is slower in the real measurement, or pick differently per process"
    )


_DIRECTION = re.compile(r"^(?P<entry>[^:]+):(?P<knob>[A-Za-z_][\w]*)=")


class SearchOptimizer(Optimizer):
    """Offline search over ``tunables`` (defaults to the op's ``tunables`` from the profile).

    ``max_moves_per_entry`` bounds how deep one entry is searched before the next is tried
    (``None``: no bound). ``knobs`` restricts the search to these knobs (a preset only when
    every knob it changes is one of them), e.g. the space an exhaustive sweep covers. Raises
    OptimizerError from ``propose`` when the op declares no tunables file, it is not one of the
    kernel files, or a restricting knob is in no searched entry's space.
    """

    name = "search"
    reads_profile = False  # it moves knobs by the roofline's efficiency alone

    def __init__(
        self,
        tunables: str | None = None,
        max_moves_per_entry: int | None = None,
        knobs: Sequence[str] | str | None = None,
    ):
        self.tunables = tunables
        self.max_moves_per_entry = max_moves_per_entry
        if isinstance(knobs, str):
            knobs = [k.strip() for k in knobs.split(",") if k.strip()]
        self.knobs = frozenset(knobs) if knobs else None
        self.seen: list[RoundRecord] = []

    # -- protocol --------------------------------------------------------------------------
    def propose(self, context: OptimizerContext) -> Proposal | None:
        return next(self._proposals(context), None)

    def propose_batch(self, context: OptimizerContext, k: int) -> list[Proposal]:
        """The first ``k`` moves in proposal order (each a different direction)."""
        return list(itertools.islice(self._proposals(context), k))

    def _proposals(self, context: OptimizerContext) -> Iterator[Proposal]:
        space = self.space(context)
        self._check_knobs(space, context)
        for fs, (entry, changes, family, direction) in self.all_moves(space, context):
            new = set_knobs(fs.text, entry.key, changes, parse=fs.parse)
            if new == fs.text:
                continue
            yield self._proposal(context, fs, new, entry, changes, family, direction)

    def space(self, context: OptimizerContext) -> SearchSpace:
        """The op's knobs in the incumbent's files. Raises OptimizerError when the tunables
        file is not a kernel file, or when there is nothing to move."""
        rel = self.tunables or context.tunables
        if rel and rel not in context.kernel_source:
            raise OptimizerError(
                f"the tunables file {rel} is not in kernel_source; a round may "
                "change only kernel files: add it there"
            )
        rels = [*context.kernel_source, *([rel] if rel else [])]
        sources = {**read_sources(context.root, rels), **context.sources}
        space = collect(sources, context.kernel_source, rel, context.knobs)
        if space.problems:
            raise OptimizerError("; ".join(space.problems))
        if space.empty(context.op):
            raise OptimizerError(nothing_to_move(context.op, context.kernel_source, space.unread))
        return space

    def check_ready(self, root: Path, op: OpProfile) -> None:
        """Refuse, before a campaign starts, an op with nothing to move (the message says how
        to declare knobs) or a ``knobs`` restriction that names none of its knobs."""
        manifest = {"target_op": op.name, "kernel_source": list(op.kernel_source)}
        ctx = OptimizerContext(
            root=Path(root), manifest=manifest, sources={}, tunables=op.tunables, knobs=op.knobs
        )
        self._check_knobs(self.space(ctx), ctx)

    def observe(self, record: RoundRecord) -> None:
        self.seen.append(record)

    def settings(self) -> dict[str, Any]:
        return {"name": self.name, "knobs": sorted(self.knobs) if self.knobs else None}

    def _check_knobs(self, space: SearchSpace, ctx: OptimizerContext) -> None:
        if self.knobs is None:
            return
        known = {name for _, name, _ in space.knobs(ctx.op)}
        unknown = sorted(self.knobs - known)
        if unknown:
            raise OptimizerError(
                f"--knobs {unknown} are in no searched entry's space of op {ctx.op!r}; "
                f"choose from {sorted(known)}"
            )

    # -- the order of moves ----------------------------------------------------------------
    def moves(self, t: Tunables, ctx: OptimizerContext):
        """Candidate moves ``(entry, {knob: value}, family, direction)`` of one tunables file
        in proposal order, without verified-ineffective or already decided directions."""
        for _, *move in sorted(self._ranked(t, ctx), key=lambda x: x[0]):
            yield tuple(move)

    def all_moves(self, space: SearchSpace, ctx: OptimizerContext):
        """``(file space, move)`` over every file of ``space``, in proposal order: the
        tunables file's entries first, then each kernel file's in file order."""
        ranked, base = [], 0
        files = sorted(space.files, key=lambda fs: fs.source != TUNABLES)
        launched = space.launched_sites(ctx.op, ctx.launched())
        for fs in files:
            buckets = fs.source == TUNABLES
            found = self._ranked(fs.tunables, ctx, base, buckets, launched)
            ranked += [(key, fs, move) for key, *move in found]
            base += len(self.entries(fs.tunables, ctx, buckets, launched))
        for _, fs, move in sorted(ranked, key=lambda x: x[0]):
            yield fs, tuple(move)

    def _ranked(
        self,
        t: Tunables,
        ctx: OptimizerContext,
        base: int = 0,
        buckets: bool = True,
        launched: set[str] | None = None,
    ):
        done = ctx.tried() | ctx.failed() | undoing(ctx.rounds)
        done |= {r.direction_key for r in ctx.ineffective}
        stagnant = stagnant_families(ctx.rounds, t)
        ranked = []
        for e_rank, entry in enumerate(self.entries(t, ctx, buckets, launched), start=base):
            count = 0
            fam_rank: dict[str, int] = {}
            knob_rank: dict[str, int] = {}
            for knob, value_rank, changes in _entry_moves(t, entry):
                if self.knobs is not None and not set(changes) <= self.knobs:
                    continue
                family = "preset" if knob == "preset" else t.family(knob)
                fam_rank.setdefault(family, len(fam_rank))
                knob_rank.setdefault(knob, len(knob_rank))
                direction = _direction(entry, knob, changes)
                if direction in done:
                    continue
                if self.max_moves_per_entry is not None and count >= self.max_moves_per_entry:
                    break
                count += 1
                # depth-first: one family of one entry until it stagnates, then the next
                key = (family in stagnant, e_rank, fam_rank[family], value_rank, knob_rank[knob])
                ranked.append((key, entry, changes, family, direction))
        return ranked

    def entries(
        self,
        t: Tunables,
        ctx: OptimizerContext,
        buckets: bool = True,
        launched: set[str] | None = None,
    ) -> list[Entry]:
        """Relevant entries, most promising first (see the module docstring); ``buckets``: a
        tunables file: its entries of the op's kinds, ranked by the shape buckets of its
        ``bucket_for`` (a kernel file's entries are all the op's); ``launched``: only the
        sites of these kernels (and those outside any kernel)."""
        entries = [e for e in t.entries.values() if t.knob_space(e) or t.entry_presets(e)]
        if buckets:
            entries = entries_for_op(entries, t, ctx.op)
        if launched:
            entries = [e for e in entries if e.runs_with(launched)]
        shapes = _shape_buckets(t, ctx) if buckets else {}
        if shapes:
            used = {b for b, _ in shapes.values()}
            kept = [e for e in entries if e.key == MODULE or e.bucket in used]
            entries = kept or entries
        eff: dict[str, list[float]] = {}
        for b, e in shapes.values():
            eff.setdefault(b, []).append(e)
        order = {e.key: i for i, e in enumerate(entries)}

        def rank(e: Entry) -> tuple[float, int, int]:
            vals = eff.get(e.bucket or "", [])
            worst = min(vals) if vals else math.inf
            return (worst, -len(vals), order[e.key])

        return sorted(entries, key=rank)

    # -- the proposal ----------------------------------------------------------------------
    def _proposal(self, ctx, fs: FileSpace, new, entry, changes, family, direction) -> Proposal:
        rel = fs.rel
        old = {k: entry.knobs[k].value for k in changes}
        scaled = [k for k in changes if entry.knobs[k].base is not None]
        what = ", ".join(_move_text(k, old[k], v, k in scaled) for k, v in sorted(changes.items()))
        note = f" (times the {', '.join(scaled)} computed at run time)" if scaled else ""
        where = "module constants" if entry.key == MODULE else entry.key
        why = (
            _narrowing(changes)
            if entry.cls == "candidates"
            else RATIONALE.get(family)
            or RATIONALE.get(next(iter(changes)))
            or (f"the {family} knob has an unexplored value in this bucket")
        )
        buckets = _shape_buckets(fs.parse(new), ctx) if fs.source == TUNABLES else {}
        shapes = [lbl for lbl, (b, _) in buckets.items() if b == entry.bucket]
        scope = f"the {len(shapes)} shapes of bucket {entry.bucket}" if shapes else "the shapes"
        metric = ctx.manifest.get("primary_metric", "the primary metric")
        return Proposal(
            hypothesis=f"{where}: {what}{note} — {why}",
            bucket="K1",
            expected=f"higher {metric} on {scope}, no other bucket affected",
            summary=f"{where}: {what}",
            direction=direction,
            family=family,
            files={rel: new},
            next_direction="the next knob of the same bucket, or the next bucket by efficiency",
            notes={"entry": entry.key, "file": rel, "changes": dict(changes), "old": old},
        )


def _move_text(knob: str, old: Any, new: Any, scaled: bool) -> str:
    """``BLOCK 64 -> 128``; a factor on a value computed at run time reads as one
    (``num_warps x1.0 -> x0.5``), not as the value (:func:`undoing` reads it back)."""
    mark = "x" if scaled and isinstance(old, int | float) and isinstance(new, int | float) else ""
    return f"{knob} {mark}{old!r} -> {mark}{new!r}"


def _entry_moves(t: Tunables, entry: Entry):
    """(knob, value rank, changes) for every single-knob move, then every preset."""
    for knob, values in t.knob_space(entry).items():
        cur = entry.knobs[knob].value
        computed = isinstance(cur, Computed)  # a declared literal replaces the expression
        ordered = sorted(
            (v for v in values if v != cur and (computed or type(v) is type(cur))),
            key=lambda v: (_distance(cur, v), values.index(v)),
        )
        for i, v in enumerate(ordered):
            yield knob, i, {knob: v}
    for i, preset in enumerate(t.entry_presets(entry)):
        changes = {k: v for k, v in preset.items() if k in entry.knobs}
        if changes and any(entry.knobs[k].value != v for k, v in changes.items()):
            yield "preset", i, changes


def _distance(cur: Any, v: Any) -> float:
    if isinstance(cur, bool) or not isinstance(cur, int | float):
        return 0.0
    if cur > 0 and v > 0:
        return abs(math.log2(v / cur))
    return abs(v - cur)


def _direction(entry: Entry, knob: str, changes: Mapping[str, Any]) -> str:
    if knob == "preset":
        return f"{entry.key}:preset={json.dumps(dict(sorted(changes.items())))}"
    (value,) = changes.values()
    return f"{entry.key}:{knob}={value!r}"


def family_of(direction: str, t: Tunables) -> str | None:
    """The knob family of a search direction key (None for a foreign direction)."""
    m = _DIRECTION.match(direction or "")
    if not m:
        return None
    return "preset" if m["knob"] == "preset" else t.family(m["knob"])


def undoing(rounds: Sequence[RoundRecord]) -> set[str]:
    """The direction that would undo the last accepted round, when it was one search move of
    one knob (``entry:knob=<old value>``, read back from the summary the move wrote:
    ``"<entry>: <knob> <old> -> <new>"``); empty otherwise."""
    last = next((r for r in reversed(rounds) if r.accepted), None)
    m = _DIRECTION.match(last.direction if last else "")
    if not m or m["knob"] == "preset":
        return set()
    knob, new = m["knob"], last.direction[m.end() :]
    s = re.fullmatch(rf".*: {knob} x?(?P<old>.+) -> x?{re.escape(new)}", last.summary)
    return {f"{m['entry']}:{knob}={s['old']}"} if s else set()


def stagnant_families(rounds: Sequence[RoundRecord], t: Tunables) -> set[str]:
    """Families with at least two verified rollbacks since the last accepted round."""
    counts: Counter[str] = Counter()
    for r in rounds:
        if r.accepted:
            counts.clear()
        elif r.verified_ineffective:
            fam = family_of(r.direction, t)
            if fam:
                counts[fam] += 1
    return {f for f, n in counts.items() if n >= STAGNATION_ROLLBACKS}


def _shape_buckets(t: Tunables, ctx: OptimizerContext) -> dict[str, tuple[str, float]]:
    """label -> (bucket, efficiency) of the analysed shapes (representative ones first), via the
    tunables module's ``bucket_for(M, N, K)``; {} when it cannot be told."""
    fn = _bucket_fn(t)
    if fn is None:
        return {}
    analysis = {s["label"]: s for s in (ctx.analysis or {}).get("shapes", [])}
    reps = set(ctx.manifest.get("representative_shapes") or [])
    shapes = [s for s in ctx.manifest.get("target_shapes") or [] if not reps or s["label"] in reps]
    out = {}
    for s in shapes:
        try:
            b = str(fn(int(s["M"]), int(s["N"]), int(s.get("K", 0))))
        except Exception:  # noqa: BLE001 - a user function; no mapping is a valid answer
            return {}
        eff = analysis.get(s["label"], {}).get("efficiency")
        out[s["label"]] = (b, float(eff) if eff is not None else 1.0)
    return out


_BUCKET_FNS: dict[str, Any] = {}


def _bucket_fn(t: Tunables):
    """``bucket_for`` of the tunables module, executed from its text (cached per text)."""
    if "def bucket_for" not in t.text:
        return None
    if t.text not in _BUCKET_FNS:
        name = f"_ratchet_tunables_{len(_BUCKET_FNS)}"
        mod = types.ModuleType(name)
        sys.modules[name] = mod  # dataclasses look their module up while the file executes
        try:
            exec(compile(t.text, "<tunables>", "exec"), mod.__dict__)  # noqa: S102 - user's file
            _BUCKET_FNS[t.text] = getattr(mod, "bucket_for", None)
        except Exception:  # noqa: BLE001 - unimportable alone: rank without buckets
            _BUCKET_FNS[t.text] = None
        finally:
            sys.modules.pop(name, None)
    return _BUCKET_FNS[t.text]
