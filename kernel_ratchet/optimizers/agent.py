"""The ``agent`` optimizer: any coding-agent command proposes the change.

The command template (e.g. ``claude -p "$(cat {prompt_file})"`` or
``codex exec --cd {workdir} - < {prompt_file}``) is run once per round through the shell with
``{prompt_file}``, ``{workdir}`` (the project root) and ``{hypothesis_file}`` substituted. The
prompt file is a context pack: manifest, rules, incumbent kernel sources, recent rounds,
verified-ineffective directions, tips and the latest analysis. The agent edits the kernel files
in place and writes ``hypothesis.json``::

    {"hypothesis": "...", "bucket": "K1", "expected": "...", "summary": "one line",
     "direction": "optional stable key", "fix": false}   # or {"stop": true, "reason": "..."}

Guards: each call starts from the incumbent's kernel files; the protected files (harness, focused
tests, adapter, ratchet.yaml) are hashed before the call and a change to any of them raises
OptimizerError (nothing is validated, nothing of the user's is reverted). A change to any other
non-kernel file is left as the agent wrote it; the round's scope check rolls the round back.
A call that fails (exit code, time limit, no hypothesis.json, a verified-ineffective direction)
is retried up to ``retries`` times; ``retries`` consecutive build/correctness rollbacks end the
agent's turn (``propose`` returns None). Every call is logged with its time (and cost, when the
agent prints a JSON line with ``total_cost_usd``/``cost_usd``) to ``<campaign>/agent/calls.jsonl``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.profiling import render_md
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.guard.static_audit import BUCKETS
from kernel_ratchet.optimizers.base import Optimizer, OptimizerContext, OptimizerError, Proposal
from kernel_ratchet.scoring.decision import Status

FAILURE_CATEGORIES = (Category.BUILD, Category.TEST, Category.CORRECTNESS)
RULES = """\
- One round = one change = one hypothesis. Write hypothesis.json BEFORE you edit anything.
- Edit only these kernel files: {kernel}. Never touch: {protected}.
- Do not run git, do not commit, do not revert anything: the tool measures, decides, commits or
  rolls back. Do not repeat a verified-ineffective direction.
- Correctness first: the focused test (`{test}`) must pass on every shape.
- Transfer buckets: K1 kernel-internal (tiles, stages, warps), K2 layout variants, K3 single-launch
  fusion, K4 same-call data flow, W1 weight cache (bounded); W2/W3 (activation caches,
  memoization keyed on non-weight tensors) are forbidden.
"""


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


class AgentOptimizer(Optimizer):
    """Runs ``command`` per round (see the module docstring); ``timeout_s`` per call."""

    name = "agent"

    def __init__(
        self, command: str, timeout_s: float = 1800.0, retries: int = 2, recent: int = 6
    ) -> None:
        if not command or "{prompt_file}" not in command:
            raise OptimizerError(
                "the agent command must contain {prompt_file}, e.g. "
                "--agent-cmd 'claude -p \"$(cat {prompt_file})\"'"
            )
        self.command = command
        self.timeout_s = timeout_s
        self.retries = retries
        self.recent = recent
        self.failures = 0  # consecutive build/correctness rollbacks
        self.last_failure: str = ""

    # -- protocol --------------------------------------------------------------------------
    def propose(self, context: OptimizerContext) -> Proposal | None:
        if self.failures > self.retries:
            return None
        base = (
            context.campaign_dir / "agent"
            if context.campaign_dir
            else Path(tempfile.mkdtemp(prefix="ratchet-agent-"))
        )
        problem = ""
        for attempt in range(1, self.retries + 2):
            adir = base / f"round-{context.round_no}" / f"attempt-{attempt}"
            adir.mkdir(parents=True, exist_ok=True)
            result = self._call(context, adir, base, attempt, problem)
            if isinstance(result, Proposal) or result is None:
                return result
            problem = result
        raise OptimizerError(
            f"the agent failed {self.retries + 1} times for round-"
            f"{context.round_no}: {problem} (logs under {base})"
        )

    def observe(self, record: RoundRecord) -> None:
        if record.status is Status.ROLLED_BACK and record.category in FAILURE_CATEGORIES:
            self.failures += 1
            self.last_failure = (
                f"round-{record.round} ({record.hypothesis}) was rolled back: {record.reason}"
            )
        else:
            self.failures = 0
            self.last_failure = ""

    # -- one call --------------------------------------------------------------------------
    def _call(
        self, ctx: OptimizerContext, adir: Path, base: Path, attempt: int, problem: str
    ) -> Proposal | str | None:
        root = Path(ctx.root)
        for rel, text in ctx.sources.items():  # every call starts from the incumbent
            if (root / rel).read_text() != text:
                (root / rel).write_text(text)
        hyp = adir / "hypothesis.json"
        prompt = adir / "prompt.md"
        prompt.write_text(context_pack(ctx, hyp, problem or self.last_failure, self.recent))
        protected = {p: _sha(root / p) for p in ctx.protected}
        cmd = self.command.format(prompt_file=prompt, workdir=root, hypothesis_file=hyp)
        t0 = time.monotonic()
        rc, out, timed_out = _run(cmd, root, adir / "agent.log", self.timeout_s)
        secs = time.monotonic() - t0
        _log_call(
            base,
            {
                "round": ctx.round_no,
                "attempt": attempt,
                "at": now(),
                "seconds": round(secs, 3),
                "returncode": rc,
                "timed_out": timed_out,
                "cost_usd": _cost(out),
                "log": str(adir / "agent.log"),
            },
        )
        touched = sorted(p for p, h in protected.items() if _sha(root / p) != h)
        if touched:
            raise OptimizerError(
                f"the agent changed protected files {touched}; nothing was validated and "
                "nothing was reverted: restore them yourself, then `ratchet resume`"
            )
        if timed_out:
            return f"the call exceeded its time limit of {self.timeout_s:.0f} s"
        if rc != 0:
            return f"the agent exited with code {rc} (see {adir / 'agent.log'})"
        return self._read(ctx, hyp)

    def _read(self, ctx: OptimizerContext, hyp: Path) -> Proposal | str | None:
        try:
            h = json.loads(hyp.read_text())
        except FileNotFoundError:
            return f"the agent did not write {hyp}"
        except json.JSONDecodeError as exc:
            return f"{hyp} is not valid JSON ({exc})"
        if h.get("stop"):
            return None
        summary = str(h.get("summary") or h.get("hypothesis", "")).strip().splitlines()
        direction = str(h.get("direction") or (summary[0] if summary else "")).strip()
        if ctx.is_ineffective(direction):
            return f"direction {direction!r} is verified ineffective; propose another one"
        root = Path(ctx.root)
        now_ = {rel: (root / rel).read_text() for rel in ctx.kernel_source if (root / rel).exists()}
        files = {rel: t for rel, t in now_.items() if t != ctx.sources.get(rel)}
        bucket = str(h.get("bucket") or "K1")
        try:
            return Proposal(
                hypothesis=str(h.get("hypothesis", "")),
                bucket=bucket if bucket in BUCKETS else "K1",
                expected=str(h.get("expected", "")),
                summary=summary[0] if summary else "",
                direction=direction or "agent",
                family=str(h.get("family") or "agent"),
                files=files,
                next_direction=str(h.get("next_direction", "")),
                fix=h.get("fix", False),
            )
        except ValueError as exc:
            return f"hypothesis.json is incomplete: {exc}"


def _run(cmd: str, cwd: Path, log: Path, timeout_s: float) -> tuple[int | None, str, bool]:
    """Run the agent in its own session (a first Ctrl+C of the driver does not kill it)."""
    with open(log, "w", encoding="utf-8") as f:
        f.write(f"$ {cmd}\n")
        f.flush()
        proc = subprocess.Popen(
            cmd, shell=True, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return rc, log.read_text(errors="replace"), timed_out


def _cost(output: str) -> float | None:
    total = None
    for line in output.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        with contextlib.suppress(ValueError, TypeError):
            d = json.loads(line)
            for key in ("total_cost_usd", "cost_usd", "cost"):
                if isinstance(d.get(key), int | float):
                    total = (total or 0.0) + float(d[key])
                    break
    return total


def _log_call(base: Path, entry: dict[str, Any]) -> None:
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "calls.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def context_pack(ctx: OptimizerContext, hyp: Path, problem: str, recent: int = 6) -> str:
    """The prompt: everything the agent may use, and the protocol it must follow."""
    m = ctx.manifest
    parts = [
        f"# Optimize `{ctx.op}` — round-{ctx.round_no}\n",
        f"Project root (your working directory): {ctx.root}\n",
        "## Protocol\n1. Decide ONE change and write it, before editing, to "
        f'`{hyp}` as JSON: {{"hypothesis", "bucket", "expected", "summary"}} '
        '(with "fix": true for a correctness fix, decided as `ratchet validate --fix` decides '
        "one: the only round that may run while the incumbent fails the harness's check on "
        'every shape; or {"stop": true, "reason": ...} when nothing is left to try).\n'
        "2. Edit the kernel files in place. 3. Exit. The tool validates the change.\n",
        "## Rules\n"
        + RULES.format(
            kernel=", ".join(ctx.kernel_source),
            protected=", ".join(ctx.protected) or "-",
            test=m.get("test_command", "-"),
        ),
        "## Campaign\n"
        + "\n".join(
            f"- {k}: {m.get(k)}"
            for k in (
                "target_op",
                "target_backend",
                "target_gpu",
                "campaign_type",
                "primary_metric",
                "representative_shapes",
                "performance_target",
            )
        )
        + "\n",
    ]
    if problem:
        parts.append(f"## Your previous attempt\n{problem}\n")
    rows = [
        f"- round-{r.round} {r.status.value} ({r.category.value}): {r.hypothesis} — {r.reason}"
        + (f" (failed tests: {', '.join(r.failed_tests)})" if r.failed_tests else "")
        for r in list(ctx.rounds)[-recent:]
    ]
    parts.append("## Recent rounds\n" + ("\n".join(rows) or "- none yet") + "\n")
    bad = [f"- {r.direction_key} (round-{r.round}, {r.category.value})" for r in ctx.ineffective]
    parts.append(
        "## Verified-ineffective directions (never repeat)\n" + ("\n".join(bad) or "- none") + "\n"
    )
    if ctx.analysis:
        worst = sorted(ctx.analysis.get("shapes", []), key=lambda s: s.get("efficiency", 1))
        lines = [
            f"- {s['label']}: {s['bound']}-bound, {s['efficiency'] * 100:.1f}% of the "
            "measured roofline"
            for s in worst
        ]
        parts.append(f"## Analysis ({ctx.analysis.get('label')})\n" + "\n".join(lines) + "\n")
        prof = ctx.analysis.get("profile")
        if prof:  # the incumbent's kernel time breakdown (and ncu metrics), as analysis.md has it
            parts.append("\n".join(render_md(prof)).strip() + "\n")
    parts.append("## Historical tips\n" + (ctx.tips.strip() or "- none") + "\n")
    for rel, text in ctx.sources.items():
        parts.append(f"## Incumbent source: {rel}\n```\n{text}\n```\n")
    return "\n".join(parts)
