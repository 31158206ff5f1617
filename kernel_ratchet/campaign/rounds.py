"""The work inside one round: snapshot, scope check, rebuild, focused test, harness, decision,
rollback of the kernel files, and the round's records. Called by ``engine.Campaign``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign import git, workspace
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.create import harness_command, write_harness
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text, file_sha256
from kernel_ratchet.campaign.paired_round import paired_decision
from kernel_ratchet.campaign.steps import run_step
from kernel_ratchet.campaign.transfer_round import dynamic_check
from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.guard import StaticAudit, audit_change, skew_robustness
from kernel_ratchet.guard.static_audit import REJECT
from kernel_ratchet.harness.ab import SEED_POLICY
from kernel_ratchet.harness.provenance import collect_provenance
from kernel_ratchet.harness.provenance import write_provenance as save_provenance
from kernel_ratchet.scoring.decision import Status, decide

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign

BUCKETS = ("K1", "K2", "K3", "K4", "W1", "W2", "W3")
LEVELS = ("quick", "full")
TEST_TIMEOUT_S = 1800.0
HARNESS_TIMEOUT_S = 3600.0
ESCALATE_BELOW = 0.05  # a quick gain under 5% is confirmed on the full set (SPEC section 5)


# -- kernel files ------------------------------------------------------------------------------
def snapshot(c: Campaign, rdir: Path) -> None:
    """Copy the working-tree kernel files into ``rdir/kernel_snapshot`` (missing ones listed)."""
    snap = rdir / "kernel_snapshot"
    files = {}
    for rel in c.m.kernel_source:
        src = c.root / rel
        if src.exists():
            data = src.read_bytes()
            dest = snap / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            files[rel] = file_sha256(src)
        else:
            files[rel] = None
    atomic_write_json(snap / "SNAPSHOT.json", {"taken": now(), "files": files})


def incumbent_bytes(c: Campaign, rel: str) -> bytes | None:
    """A kernel file's content in the incumbent (commit, or the incumbent round's snapshot)."""
    if c.m.git_commit and c.state.incumbent_commit:
        return git.show(c.groot, c.state.incumbent_commit, os.path.relpath(c.root / rel, c.groot))
    snap = c.round_dir(c.state.incumbent_round or 1) / "kernel_snapshot"
    meta = json.loads((snap / "SNAPSHOT.json").read_text())
    return None if meta["files"].get(rel) is None else (snap / rel).read_bytes()


def restore_incumbent(c: Campaign) -> list[str]:
    """Write the incumbent's kernel files over the working tree; touch nothing else."""
    restored = []
    for rel in c.m.kernel_source:
        data, path = incumbent_bytes(c, rel), c.root / rel
        if data is None:
            if path.exists():
                path.unlink()
                restored.append(rel)
        elif not path.exists() or path.read_bytes() != data:
            atomic_write_text(path, data.decode("utf-8"))
            restored.append(rel)
    return restored


def kernel_changed(c: Campaign) -> bool:
    for rel in c.m.kernel_source:
        path = c.root / rel
        current = path.read_bytes() if path.exists() else None
        if current != incumbent_bytes(c, rel):
            return True
    return False


def ambient(c: Campaign) -> dict[str, str | None]:
    """Fingerprints of the user's own uncommitted changes outside the kernel files."""
    if workspace.is_workspace(c.m):  # the workspace's own files, not the project's
        return workspace.ambient(c)
    kernel = set(c.kernel_git)
    tips = os.path.relpath(c.profile.tips_root_path, c.groot) + "/"  # the tool writes tips
    return {
        p: file_sha256(c.groot / p)
        for p in git.changed_paths(c.groot)
        if p not in kernel and not p.startswith(tips)
    }


def out_of_scope(c: Campaign) -> list[str]:
    """Files outside kernel_source changed since the last round closed."""
    now_ = ambient(c)
    before = c.state.ambient
    return sorted(p for p in set(now_) | set(before) if now_.get(p, "-") != before.get(p, "-"))


# -- the measuring pipeline --------------------------------------------------------------------
def preconditions(c: Campaign, hypothesis: str, bucket: str, level: str) -> None:
    st = c.state
    if st.phase.value == "INITIALIZED":
        raise CampaignError("no baseline yet: run `ratchet baseline` first")
    if st.phase.value != "OPTIMIZING" or st.termination:
        why = (st.termination or {}).get("reason", st.phase.value)
        raise CampaignError(
            f"the campaign has ended ({why}); run `ratchet report`, or start a "
            "new campaign with `ratchet init`"
        )
    if not hypothesis.strip():
        raise CampaignError("state the round's hypothesis: --hypothesis 'what and why'")
    if bucket not in BUCKETS:
        raise CampaignError(f"bucket must be one of {', '.join(BUCKETS)} (SPEC section 8)")
    if level not in LEVELS:
        raise CampaignError(f"level must be quick or full, not {level!r}")
    for rel in ("logs/optimize.md", "logs/performance_trend.md"):
        c.log(rel).verify()  # an edited log stops the campaign before any work is spent
    if file_sha256(c.dir / "quick_test_bench.py") != st.harness_sha256:
        _restore_harness(c)
    if not kernel_changed(c):
        raise CampaignError(
            f"the kernel files ({', '.join(c.m.kernel_source)}) equal the incumbent's: edit "
            "them with this round's single change, then run validate"
        )


def _restore_harness(c: Campaign) -> None:
    sha = write_harness(
        c.dir, c.m, c.root, shapes=c.m.representative_shape_dicts, target_shapes=c.m.target_shapes
    )
    c.log("logs/optimize.md").append(
        f"> {now()}: quick_test_bench.py had been edited outside the tool; it was regenerated "
        "from manifest.yaml before any measurement.\n\n"
    )
    c.save()
    if sha != c.state.harness_sha256:
        raise CampaignError(
            "the regenerated harness does not match the campaign's record; "
            "manifest.yaml may have been edited: start a new campaign"
        )
    raise CampaignError(
        f"{c.dir / 'quick_test_bench.py'} was edited; the harness is generated and must not "
        "change during a campaign. It was regenerated from manifest.yaml: run validate again"
    )


def transfer_audit(c: Campaign, declared: str) -> StaticAudit:
    """The static transfer audit (SPEC section 8) of the working tree against the incumbent."""
    before, after = {}, {}
    for rel in c.m.kernel_source:
        if not rel.endswith(".py"):
            continue
        old, path = incumbent_bytes(c, rel), c.root / rel
        if old is not None:
            before[rel] = old.decode("utf-8", errors="replace")
        if path.exists():
            after[rel] = path.read_text(encoding="utf-8", errors="replace")
    return audit_change(before, after, declared_bucket=declared)


def _skew_gate(d: dict[str, Any]) -> dict[str, Any]:
    """Grouped ops: a gain on uniform token distributions that does not hold on skewed ones is
    over-fitting (SPEC section 8): an ACCEPT becomes a rollback."""
    gains = {s["label"]: s["delta"] for s in d.get("per_shape") or []}
    if not gains or any(g <= -1 for g in gains.values()):
        return d
    verdict, why = skew_robustness(gains)
    d = {**d, "skew": [verdict, why]}
    if verdict == REJECT and d["status"] == Status.ACCEPTED.value:
        d.update(
            status=Status.ROLLED_BACK.value,
            overfit=True,
            reason=f"REJECT-as-overfit: {why}; measured: {d['reason']}",
        )
    return d


def _run_harness(c: Campaign, art: Path, level: str, name: str):
    csv = art / name
    log = art / name.replace(".csv", ".log")
    h = run_step(
        "harness",
        harness_command(c.dir, level, csv),
        cwd=c.root,
        log_path=log,
        timeout_s=HARNESS_TIMEOUT_S,
    )
    return h, csv


def _failed(base: dict[str, Any], category: str, reason: str) -> dict[str, Any]:
    return {
        **base,
        "status": Status.ROLLED_BACK.value,
        "category": category,
        "reason": reason,
        "finished": now(),
        "decision": None,
    }


def _decide(c: Campaign, cand_rel: str, inc_rel: str, build_ok=True, test_ok=True) -> dict:
    cand = c.table(cand_rel)
    inc = c.table(inc_rel).restrict([r.label for r in cand.rows])
    d = decide(
        inc,
        cand,
        c.m.campaign_type,
        regression_threshold=c.m.regression_threshold,
        build_ok=build_ok,
        test_ok=test_ok,
    )
    return {
        "status": d.status.value,
        "reason": d.reason,
        "trade_off": d.trade_off,
        "regressions": list(d.regressions),
        "aggregate_before": d.aggregate_before,
        "aggregate_after": d.aggregate_after,
        "gain": d.gain,
        "gain_noise": d.gain_noise,
        "ambiguous": d.ambiguous,
        "per_shape": [
            {
                "label": s.label,
                "incumbent": s.incumbent,
                "candidate": s.candidate,
                "delta": s.delta,
                "noise": s.noise,
                "verdict": s.verdict.value,
            }
            for s in d.per_shape
        ],
    }


def measure(c: Campaign, n: int, p: dict[str, Any]) -> dict[str, Any]:
    """Scope check, rebuild, focused test, harness, decision. Returns the round record; its
    ``seconds`` say where the round's wall time went (monotonic clock, per step that ran:
    rebuild, test, harness_quick/_full, ab_quick/_full, transfer; measure = all of them)."""
    t0 = time.monotonic()
    record = _measure(c, n, p)
    record.setdefault("seconds", {})["measure"] = round(time.monotonic() - t0, 1)
    return record


def time_line(record: dict[str, Any]) -> str:
    """``"114 s: test 15, harness_quick 20, ab_quick 79"`` from a round record's ``seconds``."""
    sec = dict(record.get("seconds") or {})
    total = sec.pop("measure", None)
    steps = ", ".join(f"{k} {v:.0f}" for k, v in sec.items())
    return f"{total:.0f} s: {steps}" if total is not None else steps


def _timed(base: dict[str, Any], step: str, seconds: float) -> None:
    base.setdefault("seconds", {})[step] = round(seconds, 1)


def _measure(c: Campaign, n: int, p: dict[str, Any]) -> dict[str, Any]:
    rdir = c.round_dir(n)
    art = rdir / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    if workspace.is_workspace(c.m):
        diff = workspace.candidate_diff(c)
    else:
        diff = (
            git.diff(c.groot, c.state.incumbent_commit, c.kernel_git)
            if c.m.git_commit and c.state.incumbent_commit
            else ""
        )
    (art / "candidate.diff").write_text(diff)
    base = {
        "round": n,
        "hypothesis": p["hypothesis"],
        "bucket": p["bucket"],
        "change": p.get("change") or _diffstat(diff),
        "expected": p.get("expected", ""),
        "lesson": p.get("lesson", ""),
        "next_direction": p.get("next_direction", ""),
        "takeaway": p.get("takeaway", ""),
        "summary": p.get("summary", ""),
        "direction": p.get("direction", ""),
        "level": p["level"],
        "started": p["started"],
        "csv": None,
        "quick_csv": None,
        "incumbent_csv": None,
        "test_command": c.m.test_command,
        "harness_command": "",
        "incumbent_round": c.state.incumbent_round,
        "out_of_scope": [],
        "seconds": {},
    }
    scope = out_of_scope(c)
    if scope:
        return {
            **_failed(
                base,
                "scope",
                f"files outside kernel_source changed: {scope}; "
                "a round may change only the kernel files. Revert them before the "
                "next round",
            ),
            "out_of_scope": scope,
        }
    audit = transfer_audit(c, p["bucket"])
    base["transfer_static"] = asdict(audit)
    if audit.verdict == REJECT:
        return _failed(
            base,
            "overfit",
            f"REJECT-as-overfit before any benchmark ({audit.bucket}): {audit.reason}",
        )
    if c.m.rebuild_command:
        c.say(f"round-{n}: rebuild")
        b = run_step(
            "rebuild",
            c.m.rebuild_command,
            cwd=c.root,
            log_path=art / "rebuild.log",
            timeout_s=TEST_TIMEOUT_S,
        )
        _timed(base, "rebuild", b.seconds)
        if not b.ok:
            return _failed(base, "build", f"build failed: {b.reason}")
    c.say(f"round-{n}: focused test")
    t = run_step(
        "focused test",
        c.m.test_command,
        cwd=c.root,
        log_path=art / "test.log",
        timeout_s=TEST_TIMEOUT_S,
    )
    _timed(base, "test", t.seconds)
    if not t.ok:
        return _failed(base, "test", f"focused test failed: {t.reason}")
    return _measure_levels(c, n, base, art)


def _level(c: Campaign, n: int, base: dict, art: Path, level: str, name: str):
    """Harness at ``level`` (the round's CSV), then the decision against the incumbent:
    correctness and shape-set gates on the CSV, then the paired A/B. Returns (csv, decision)
    or (None, failed record)."""
    shapes = len(c.m.representative_shapes) if level == "quick" else len(c.m.target_shapes)
    c.say(f"round-{n}: harness, {level} level ({shapes} shapes)")
    h, csv = _run_harness(c, art, level, name)
    _timed(base, f"harness_{level}", h.seconds)
    base["harness_command"] = base.get("harness_command") or h.command
    if not h.ok or not csv.exists():
        return None, _failed(base, "harness", f"the {level}-level harness failed: {h.reason}")
    write_provenance(c, art, level)
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    try:
        gates = _decide(c, c.rel(csv), inc_rel)
    except SchemaError as exc:
        return None, _failed(base, "schema", f"benchmark CSV schema drift: {exc}")
    if any(not r.passed for r in c.table(c.rel(csv)).rows):
        return csv, {**gates, "paired": False}
    t0 = time.monotonic()
    d = paired_decision(c, n, art, c.rel(csv), inc_rel)
    _timed(base, f"ab_{level}", time.monotonic() - t0)
    if "failure" in d:
        return None, {
            **_failed(base, d["category"], d["reason"]),
            "csv": c.rel(csv),
            "failure": d["failure"],
        }
    d["harness_only"] = {k: gates[k] for k in ("status", "reason", "gain")}
    return csv, _skew_gate(d)


def _measure_levels(c: Campaign, n: int, base: dict, art: Path) -> dict[str, Any]:
    level = base["level"]
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    csv, d = _level(c, n, base, art, level, "benchmark.csv")
    if csv is None:
        return d
    record = {**base, "csv": c.rel(csv), "incumbent_csv": inc_rel, "decision": d}
    if level == "quick" and d["status"] == Status.ACCEPTED.value and d["gain"] < ESCALATE_BELOW:
        c.say(f"round-{n}: quick gain {d['gain'] * 100:+.2f}% < 5%: full validation")
        quick = art / "benchmark_quick.csv"
        os.replace(csv, quick)
        base["quick_csv"] = c.rel(quick)
        csv, d = _level(c, n, base, art / "full", "full", "benchmark.csv")
        if csv is None:
            return d
        final = art / "benchmark.csv"
        os.replace(csv, final)
        record.update(
            level="full",
            escalated=True,
            quick_csv=c.rel(quick),
            csv=c.rel(final),
            incumbent_csv=c.state.incumbent_full_csv,
            decision=d,
        )
    if d["status"] == Status.ACCEPTED.value and d.get("paired"):
        c.say(f"round-{n}: transfer check (fresh tensors vs the benchmark idiom)")
        t0 = time.monotonic()
        dyn = dynamic_check(c, art, [r.label for r in c.table(record["csv"]).rows])
        _timed(base, "transfer", time.monotonic() - t0)
        d = {**d, "dynamic": dyn}
        if dyn["verdict"] == "OVERFIT":
            why = f"REJECT-as-overfit: {dyn['reason']}; measured: {d['reason']}"
            d.update(status=Status.ROLLED_BACK.value, overfit=True, reason=why)
        record["decision"] = d
    category = "ok" if d["status"] == Status.ACCEPTED.value else _why(c, d)
    return {
        **record,
        "status": d["status"],
        "category": category,
        "reason": d["reason"],
        "finished": now(),
    }


def _why(c: Campaign, d: dict[str, Any]) -> str:
    if "Check=FAIL" in d["reason"] or "FAIL" in d["reason"].split(":")[0]:
        return "correctness"
    if d.get("unconfirmed"):
        return "unconfirmed"
    if d.get("overfit"):
        return "overfit"
    worst = min((s["delta"] for s in d.get("per_shape") or []), default=0.0)
    if d["regressions"] and worst <= -c.m.regression_threshold:
        return "regression"
    return "noise" if d.get("ambiguous") else "no-gain"


def _diffstat(diff: str) -> str:
    added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    files = [ln[6:] for ln in diff.splitlines() if ln.startswith("+++ b/")]
    where = ", ".join(files) or "kernel files"
    return f"{where}: +{added} -{removed} lines (artifacts/candidate.diff)"


def interrupted_record(c: Campaign, n: int, p: dict[str, Any], how: str) -> dict[str, Any]:
    base = {
        "round": n,
        "hypothesis": p.get("hypothesis", ""),
        "bucket": p.get("bucket", "-"),
        "change": p.get("change", "see kernel_snapshot"),
        "level": p.get("level", "quick"),
        "started": p.get("started", ""),
        "csv": None,
        "quick_csv": None,
        "incumbent_csv": None,
        "test_command": c.m.test_command,
        "harness_command": "",
        "out_of_scope": [],
        "incumbent_round": c.state.incumbent_round,
        "expected": p.get("expected", ""),
        "lesson": "",
        "next_direction": p.get("next_direction", ""),
        "takeaway": "",
        "summary": p.get("summary", ""),
        "direction": p.get("direction", ""),
    }
    return _failed(
        base,
        "interrupted",
        f"interrupted by {how} before a decision; the "
        f"candidate is kept in rounds/round-{n}/kernel_snapshot and the kernel files "
        "were restored to the incumbent",
    )


def load_record(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def write_provenance(c: Campaign, art: Path, level: str) -> None:
    """``provenance.json`` next to a harness CSV: how its numbers were measured (engine and
    parameters, GPU and clocks, driver, versions, commit, seed policy, environment hash)."""
    import torch

    prov = collect_provenance(
        {"engine": c.m.timing_engine, **c.m.timing_params},
        candidate_commit=git.head(c.groot),
        seed_policy=f"harness inputs from the campaign seed {c.m.seed}, fresh per shape; "
        f"paired A/B: {SEED_POLICY}",
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
    prov["level"] = level
    save_provenance(art / "provenance.json", prov)
