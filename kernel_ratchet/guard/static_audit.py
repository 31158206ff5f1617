"""Static transfer audit of one round's change (SPEC section 8), on the syntax tree.

:func:`audit_change` parses every kernel file at the incumbent and in the candidate
(:mod:`.cache_scan`), keeps the caches and keyed uses the candidate *adds*, classifies each key
component (:mod:`.keys`) and puts the change into one bucket:

* **W3** generic memoization: a memoizing decorator over a function taking a non-weight tensor,
  a key made of ``*args``/``**kwargs``, or a cache keyed on a non-weight tensor inside the op
  itself (a function named ``forward``/``backward``/``fwd``/``bwd``/``gemm``/``matmul``/``mm``/
  ``linear``) — REJECT-as-overfit;
* **W2** any other cache keyed on the identity/address of an activation, grad_out, scale,
  routing tensor or a tensor of unknown role — REJECT-as-overfit (``_version``, shape or dtype
  in the key change nothing: the tensor is new every step);
* **W1** a cache keyed only on weight identity: ALLOW when the key also holds that weight's
  ``_version`` (the gain is bounded by quant_time(weight)/step_time), REJECT when it does not
  (it would serve a stale copy after the optimizer step);
* without such a cache: **K4** when what the forward saves for backward changed, **K3** when
  kernel launches were fused (fewer launches, or a new ``*fuse*`` kernel), **K2** when a layout
  specialization appeared (``nt``/``tn``/``kmajor``/``trans``... names), **K1** when only
  constants changed (tiles, stages, warps) — or the ``declared_bucket`` when the tree shows
  none of these. A declared K-bucket contradicted by a cache is overridden, with the evidence.

Grouped ops: a new ``tl.constexpr`` named like a per-group row count, a constant index into the
tokens-per-expert tensor, or a kernel that stops receiving it, assumes uniform expert loads —
REJECT-as-overfit whatever the bucket (the per-shape skew check catches what this misses).

Limits: roles come from names (see :mod:`.roles`); a cache reached through another module, an
``exec``, ``getattr`` with a computed name, or C/CUDA code is not seen. The audit proves the
absence of the patterns above, not the absence of over-fitting; the dynamic check is the other
half.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kernel_ratchet.guard.cache_scan import CacheUse, FileScan, scan_source
from kernel_ratchet.guard.cache_values import DESCRIPTOR, PLAN, TENSOR, module_of
from kernel_ratchet.guard.keys import KeyComponent

BUCKETS = ("K1", "K2", "K3", "K4", "W1", "W2", "W3")
ALLOW, REJECT = "ALLOW", "REJECT-as-overfit"
_OP_WORDS = ("forward", "backward", "fwd", "bwd", "gemm", "matmul", "mm", "linear")


@dataclass(frozen=True)
class StaticAudit:
    """The audit's finding. ``evidence`` items read ``file:line — what``."""

    bucket: str
    evidence: tuple[str, ...]
    cache_keys: tuple[str, ...]
    verdict: str  # ALLOW | REJECT-as-overfit
    reason: str

    def __post_init__(self) -> None:
        if self.bucket not in BUCKETS:
            raise ValueError(f"bucket must be one of {BUCKETS}, got {self.bucket!r}")
        if self.verdict not in (ALLOW, REJECT):
            raise ValueError(f"verdict must be {ALLOW} or {REJECT}, got {self.verdict!r}")


@dataclass(frozen=True)
class _Judged:
    use: CacheUse
    bucket: str | None  # None: a config cache (no tensor identity in the key)
    verdict: str
    why: str


def _is_op(function: str) -> bool:
    leaf = function.rsplit(".", 1)[-1].lower()
    return any(w in leaf.split("_") or leaf.startswith(w) for w in _OP_WORDS)


def _strict(use: CacheUse) -> tuple[KeyComponent, ...]:
    """The key parts with geometry read as the identity of its tensor: how a cache that holds
    a tensor (or may) is judged, whatever its key is computed from."""
    return tuple(
        KeyComponent(p.text, "identity", p.tensor, p.role) if p.kind == "geometry" else p
        for p in use.components
    )


def _locates_its_tensors(parts: tuple[KeyComponent, ...]) -> bool:
    """Whether a key names, for each tensor whose address it holds, that tensor's shape and
    strides too, and nothing of a tensor but such parts and geometry."""
    if any(p.kind not in ("address", "meta", "geometry", "value") for p in parts):
        return False
    located = {p.tensor for p in parts if p.kind == "address"}
    meta = {(p.tensor, w) for p in parts if p.kind == "meta" for w in ("shape", "stride")
            if w in p.text}  # fmt: skip
    return bool(located) and all((t, w) in meta for t in located for w in ("shape", "stride"))


def judge_use(use: CacheUse) -> _Judged:
    """Bucket and verdict of one keyed cache use from its key components.

    A key with geometry parts (``_tma_ok(a)``, ``a.data_ptr() % 16``) is a launch-plan key
    only when the cache holds no tensor (:mod:`.cache_values`); a cache that holds a tensor is
    judged as if the geometry were the tensor's identity.
    """
    if use.value == DESCRIPTOR and _locates_its_tensors(use.components):
        why = (
            "TMA descriptor cache keyed on each tensor's address, shape and strides: a "
            "descriptor holds where a tensor lives, not its values, so a hit on a reused "
            "address serves what a new encode would"
        )
        return _Judged(use, None, ALLOW, why)
    geometry = any(p.kind == "geometry" for p in use.components)
    parts = _strict(use) if use.value == TENSOR else use.components
    fresh = [p for p in parts if p.kind in ("identity", "address", "args", "content") and p.fresh]
    weights = {p.tensor for p in parts if p.kind in ("identity", "address") and not p.fresh}
    if fresh:
        what = ", ".join(dict.fromkeys(p.describe() for p in fresh))  # each part once
        generic = use.kind in ("memo", "memo-call", "search") or any(
            p.kind in ("args", "content") for p in fresh
        )
        bucket = "W3" if generic or _is_op(use.function) else "W2"
        kind = "generic memoization" if bucket == "W3" else "activation/grad_out cache"
        return _Judged(use, bucket, REJECT, f"{kind} keyed on {what}: never hits in training")
    if weights:
        versioned = {p.tensor for p in parts if p.kind == "version"}
        missing = sorted(w for w in weights if w not in versioned)
        if missing:
            return _Judged(
                use,
                "W1",
                REJECT,
                f"weight cache without {missing[0]}._version: "
                "serves a stale copy after the optimizer step",
            )
        return _Judged(use, "W1", ALLOW, "weight cache keyed on identity + _version")
    if geometry and use.value == PLAN:
        return _Judged(use, None, ALLOW, "launch-plan cache keyed on geometry: transfers")
    if geometry:
        why = (
            "cache keyed on geometry; what it holds is not readable statically: "
            "the dynamic transfer check judges it"
        )
        return _Judged(use, None, ALLOW, why)
    return _Judged(use, None, ALLOW, "config cache: no tensor identity in the key")


def _added_uses(before: FileScan | None, after: FileScan) -> list[CacheUse]:
    """Uses in ``after`` whose signature ``before`` lacks, one per signature (first line)."""
    old = {u.signature for u in before.uses} if before else set()
    out: dict[tuple[str, str, str, str], CacheUse] = {}
    for u in sorted(after.uses, key=lambda u: u.line):
        if u.signature not in old:
            out.setdefault(u.signature, u)
    return list(out.values())


def _scan_all(files: Mapping[str, str]) -> tuple[dict[str, FileScan], list[str]]:
    """Every file scanned twice: the second time with the geometry helpers the first found
    in the others, so a launcher that imports its helpers reads them as it reads its own."""
    scans, errors = {}, []
    for path, text in sorted(files.items()):
        try:
            scans[path] = scan_source(path, text)
        except SyntaxError as exc:
            errors.append(f"{path}:{exc.lineno} — does not parse: {exc.msg}")
    exports = {module_of(p): s.geometry_defs for p, s in scans.items() if s.geometry_defs}
    if exports:
        scans = {p: scan_source(p, files[p], exports) for p in scans}
    return scans, errors


def _k_signals(before: dict[str, FileScan], after: dict[str, FileScan]) -> list[tuple[str, str]]:
    """(bucket, evidence) of every K-bucket signature in the change, most specific first."""
    out: list[tuple[str, str]] = []
    for path in sorted(after):
        b, a = before.get(path), after[path]
        saved_b = b.saved if b else set()
        for item in sorted(a.saved ^ saved_b):
            sign = "+" if item in a.saved else "-"
            out.append(("K4", f"{path} — saved for backward {sign} {item}"))
        fused = sorted(k for k in a.jit_kernels - (b.jit_kernels if b else set()) if "fuse" in k)
        out += [("K3", f"{path} — new fused kernel {k}") for k in fused]
        if b and len(a.launches) < len(b.launches):
            out.append(("K3", f"{path} — kernel launches {len(b.launches)} -> {len(a.launches)}"))
        for name in sorted(a.layout_names - (b.layout_names if b else set())):
            out.append(("K2", f"{path} — new layout specialization {name}"))
    same_files = set(before) == set(after)
    if same_files and all(before[p].masked == after[p].masked for p in after):
        out.append(("K1", f"{', '.join(sorted(after))} — only constants changed (tiles/config)"))
    order = {k: i for i, k in enumerate(("K4", "K3", "K2", "K1"))}
    return sorted(out, key=lambda s: order[s[0]])


def _uniform_hints(before: dict[str, FileScan], after: dict[str, FileScan]) -> list[str]:
    out = []
    for path, a in sorted(after.items()):
        b = before.get(path)
        old = {text for _, text in b.uniform_hints} if b else set()
        out += [f"{path}:{line} — {text}" for line, text in a.uniform_hints if text not in old]
        if b:
            fed = {k for k, roles in b.launches if "routing" in roles}
            now = {k for k, roles in a.launches if "routing" in roles}
            launched = {k for k, _ in a.launches}
            out += [
                f"{path} — kernel {k} no longer receives the tokens-per-expert tensor"
                for k in sorted((fed - now) & launched)
            ]
    return out


def _cache_bucket(judged: list[_Judged]) -> _Judged | None:
    order = [("W3", REJECT), ("W2", REJECT), ("W1", REJECT), ("W1", ALLOW)]
    for bucket, verdict in order:
        for j in judged:
            if j.bucket == bucket and j.verdict == verdict:
                return j
    return None


def _k_bucket(
    signals: list[tuple[str, str]], declared: str | None, caches: int = 0
) -> tuple[str, str]:
    found = [b for b, _ in signals]
    if declared in found:
        return declared, f"{declared} confirmed by the syntax tree"
    if found:  # say what made it, so a driver can tell a real K4 from a harmless edit
        note = f" (declared {declared})" if declared else ""
        return found[0], f"{found[0]} inferred from the syntax tree{note}: {signals[0][1]}"
    if declared:
        return declared, f"{declared} as declared (the syntax tree shows no K1-K4 signature)"
    if caches:
        added = f"the caches it adds ({caches} keyed uses) hold no tensor identity in a key"
        return "K1", f"K1 by default: {added}; no K2-K4 signature in the syntax tree"
    return "K1", "K1 by default: no cache and no K2-K4 signature in the syntax tree"


def audit_change(
    before: Mapping[str, str], after: Mapping[str, str], *, declared_bucket: str | None = None
) -> StaticAudit:
    """Audit the candidate's kernel files ``after`` against the incumbent's ``before``.

    Both map a path relative to the project root to the file's source text; only ``.py`` files
    are parsed (others are listed as not audited). Never raises on candidate content: a file
    that does not parse gives REJECT-as-overfit with the parse error as evidence ("cannot be
    audited"). ``declared_bucket`` (K1..W3) is the driver's claim; see the module docstring.
    """
    if declared_bucket is not None and declared_bucket not in BUCKETS:
        raise ValueError(f"declared_bucket must be one of {BUCKETS}, got {declared_bucket!r}")
    py = lambda files: {p: t for p, t in files.items() if p.endswith(".py")}  # noqa: E731
    evidence = [f"{p} — not Python: not audited statically" for p in after if not p.endswith(".py")]
    b_scans, _ = _scan_all(py(before))
    a_scans, errors = _scan_all(py(after))
    if errors:
        return StaticAudit(
            declared_bucket or "K1",
            tuple(evidence + errors),
            (),
            REJECT,
            "the candidate cannot be audited: it does not parse",
        )
    judged = [judge_use(u) for p, s in a_scans.items() for u in _added_uses(b_scans.get(p), s)]
    for j in judged:
        parts = "; ".join(c.describe() for c in j.use.components)
        evidence.append(
            f"{j.use.file}:{j.use.line} — {j.use.container} in {j.use.function}: "
            f"{j.why} (key: {parts})"
        )
    keys = tuple(f"{j.use.shown()} -> {j.bucket or 'config'}" for j in judged)
    worst = _cache_bucket(judged)
    hints = _uniform_hints(b_scans, a_scans)
    evidence += [f"{h}: assumes uniform tokens per expert" for h in hints]
    if worst is not None:
        if declared_bucket and declared_bucket != worst.bucket:
            evidence.append(
                f"declared {declared_bucket} overridden by the cache found: {worst.bucket}"
            )
        bucket, verdict, reason = worst.bucket or "K1", worst.verdict, worst.why
        if verdict == ALLOW:
            reason += "; allowed, real gain bounded by quant_time(weight)/step_time"
    else:
        signals = _k_signals(b_scans, a_scans)
        evidence += [e for _, e in signals]
        bucket, reason = _k_bucket(signals, declared_bucket, len(judged))
        verdict = REJECT if bucket in ("W2", "W3") else ALLOW
    if hints and verdict == ALLOW:
        verdict = REJECT
        reason = f"{reason}; but it assumes uniform tokens per expert (gain exists only there)"
    return StaticAudit(bucket, tuple(evidence), keys, verdict, reason)
