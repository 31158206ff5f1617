"""Workspace-mode (SPEC section 3): the campaign runs on an extracted minimal stack.

``ratchet init --mode workspace`` copies the op's kernel files, its focused test and its
benchmark into the campaign directory, which is git-excluded from the project::

    <campaign_dir>/src/<kernel_source paths>      the only files a round may change
    <campaign_dir>/src/<pkg>/__init__.py          generated overlays (see below)
    <campaign_dir>/tests/<test files>             the focused test (+ its conftest/__init__)
    <campaign_dir>/bench/<benchmark module/script>
    <campaign_dir>/workspace.json                 upstream commit, file hashes, commands

Rounds run there: ``Campaign.root`` is ``<campaign_dir>/src``, so the focused test, the
harness and every snapshot, scope check and rollback act on the workspace and never on the
project. Lineage inside the workspace is kept by the rounds' kernel snapshots (the incumbent is
the last accepted round's ``kernel_snapshot``), not by git: the manifest has
``git_commit: false`` and ``git_branch: none``, and the project's branch is not touched.

Imports: every package directory on the path of an extracted module gets an *overlay*
``__init__.py`` in ``src/``. It sets the package's ``__path__`` to ``[src/<pkg>, bench/<pkg>,
<project>/<pkg>]`` (relative to itself, so the project stays relocatable) and then runs the
project's own ``__init__.py``. An extracted module therefore shadows the project's copy and
every other module of the package (adapter, reference, shapes) is imported from the project.
The rewritten test and benchmark commands run in ``src/`` with ``src`` and the project root on
``PYTHONPATH``; the generated harness puts ``src`` first on ``sys.path`` itself.

``sync_back`` is the integration gate: it writes the incumbent's kernel files (and only them)
into the project, re-runs the original focused test and a project-rooted harness on all target
shapes there, and commits only the kernel files when both pass; otherwise it restores the
project's kernel files. It refuses when a kernel file changed upstream since extraction.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign import git
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text, file_sha256
from kernel_ratchet.errors import CampaignError

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.manifest import Manifest
    from kernel_ratchet.profile.schema import OpProfile, Profile

WORKSPACE = "workspace"
WORKSPACE_FILE = "workspace.json"
SYNC_DIR = "sync-back"
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_OUTPUTS = {".pyc", ".csv", ".log"}  # what running the test or benchmark in src/ leaves


def is_workspace(m: Manifest) -> bool:
    """Whether the campaign described by ``m`` runs in workspace-mode."""
    return m.execution_mode == WORKSPACE


def src_dir(cdir: Path) -> Path:
    """The workspace's source root: what rounds treat as the project root."""
    return Path(cdir) / "src"


def rounds_root(project_root: Path, cdir: Path, m: Manifest) -> Path:
    """The directory a campaign's rounds run in: the project root, or the workspace's src/."""
    return src_dir(cdir) if is_workspace(m) else project_root


# -- extraction --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Extraction:
    """What ``extract`` wrote: the commands rewritten to run in ``src/`` and the copied files."""

    test_command: str
    benchmark_command: str
    files: dict[str, str]  # workspace-relative path -> project-relative source path


def _copy(root: Path, cdir: Path, rel: str, dest_rel: str, files: dict[str, str]) -> None:
    dest = cdir / dest_rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / rel, dest)
    files[dest_rel] = rel


def _test_dest(rel: str) -> str:
    """``tests/a/test_x.py`` -> ``tests/a/test_x.py``; ``pkg/test_x.py`` -> ``tests/pkg/...``."""
    parts = Path(rel).parts
    return Path("tests", *(parts[1:] if parts[0] == "tests" else parts)).as_posix()


def _extract_test_path(root: Path, cdir: Path, rel: str, files: dict[str, str]) -> str:
    """Copy a test file or directory (with the conftest.py/__init__.py files above it)."""
    src = root / rel
    if src.is_dir():
        for p in sorted(src.rglob("*")):
            if p.is_file() and not _SKIP_DIRS & set(p.relative_to(root).parts):
                r = p.relative_to(root).as_posix()
                _copy(root, cdir, r, _test_dest(r), files)
    else:
        _copy(root, cdir, rel, _test_dest(rel), files)
    for parent in Path(rel).parents:
        if str(parent) == ".":
            break
        for helper in ("conftest.py", "__init__.py"):
            h = (parent / helper).as_posix()
            if (root / h).is_file() and _test_dest(h) not in files:
                _copy(root, cdir, h, _test_dest(h), files)
    return _test_dest(rel)


def _module_file(root: Path, module: str) -> str | None:
    base = Path(*module.split("."))
    for cand in (base.with_suffix(".py"), base / "__main__.py"):
        if (root / cand).is_file():
            return cand.as_posix()
    return None


def _project_file(root: Path, token: str) -> str | None:
    """``token`` as a path inside the project (``::node`` ids allowed), or None."""
    path = token.split("::")[0]
    if not path or os.path.isabs(path) or path.startswith("-"):
        return None
    norm = os.path.normpath(path)
    if norm.startswith("..") or not (root / norm).exists() or norm == ".":
        return None
    return Path(norm).as_posix()


def _env_prefix(cdir: Path, root: Path) -> str:
    to_root = os.path.relpath(root, src_dir(cdir))
    return f'PYTHONPATH="$PWD:$PWD/{to_root}${{PYTHONPATH:+:$PYTHONPATH}}" '


def _rewrite_test(root: Path, cdir: Path, command: str, files: dict[str, str]) -> str:
    out = []
    for tok in shlex.split(command):
        rel = _project_file(root, tok)
        if rel is None:
            out.append(tok)
            continue
        dest = _extract_test_path(root, cdir, rel, files)
        suffix = tok[len(tok.split("::")[0]) :]
        out.append(os.path.relpath(cdir / dest, src_dir(cdir)) + suffix)
    return _env_prefix(cdir, root) + shlex.join(out)


def _rewrite_bench(
    root: Path, cdir: Path, command: str, files: dict[str, str]
) -> tuple[str, list[str]]:
    """Copy the benchmark module or script into bench/; returns the command and module dirs."""
    toks, out, dirs = shlex.split(command), [], []
    for i, tok in enumerate(toks):
        if i > 0 and toks[i - 1] == "-m" and (mod := _module_file(root, tok)):
            _copy(root, cdir, mod, f"bench/{mod}", files)
            dirs.append(mod)
            out.append(tok)  # found through the overlay __path__ (src/, bench/, project)
        elif (rel := _project_file(root, tok)) and rel.endswith(".py"):
            _copy(root, cdir, rel, f"bench/{rel}", files)
            out.append(os.path.relpath(cdir / "bench" / rel, src_dir(cdir)))
        else:
            out.append(tok)
    return _env_prefix(cdir, root) + shlex.join(out), dirs


_OVERLAY = '''"""Workspace overlay of the project package {pkg!r} (generated by kernel-ratchet).

Modules extracted into the workspace (src/, then bench/) shadow the project's; every other
module of the package is imported from the project, whose __init__.py runs below.
"""

import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
_project = _os.path.normpath(_os.path.join(_here, {to_project!r}))
__path__ = [_here, _os.path.normpath(_os.path.join(_here, {to_bench!r})), _project]
_init = _os.path.join(_project, "__init__.py")
if _os.path.exists(_init):
    __file__ = _init
    with open(_init, encoding="utf-8") as _f:
        exec(compile(_f.read(), _init, "exec"))
'''


def _write_overlays(root: Path, cdir: Path, modules: list[str], files: dict[str, str]) -> None:
    src = src_dir(cdir)
    pkgs = sorted({p.as_posix() for m in modules for p in Path(m).parents if str(p) != "."})
    for pkg in pkgs:
        here = src / pkg
        text = _OVERLAY.format(
            pkg=pkg.replace("/", "."),
            to_project=os.path.relpath(root / pkg, here),
            to_bench=os.path.relpath(cdir / "bench" / pkg, here),
        )
        here.mkdir(parents=True, exist_ok=True)
        atomic_write_text(here / "__init__.py", text)
        files[f"src/{pkg}/__init__.py"] = f"(overlay of {pkg})"


def extract(profile: Profile, op: OpProfile, cdir: Path, upstream_commit: str) -> Extraction:
    """Copy the op's minimal stack into ``cdir`` and write ``workspace.json``.

    The kernel files are copied from the project's working tree (the caller has checked that
    they equal ``upstream_commit``). Returns the rewritten commands. Raises CampaignError when a
    kernel file is missing.
    """
    root = profile.root
    files: dict[str, str] = {}
    kernel = {}
    for rel in op.kernel_source:
        if not (root / rel).is_file():
            raise CampaignError(f"kernel file {rel} does not exist in {root}; fix kernel_source")
        _copy(root, cdir, rel, f"src/{rel}", files)
        kernel[rel] = file_sha256(root / rel)
    test = _rewrite_test(root, cdir, op.test, files)
    bench, bench_modules = _rewrite_bench(root, cdir, op.benchmark, files)
    _write_overlays(root, cdir, [*op.kernel_source, *bench_modules], files)
    atomic_write_json(
        cdir / WORKSPACE_FILE,
        {
            "upstream_commit": upstream_commit,
            "extracted": now(),
            "project_root_from_campaign": os.path.relpath(root, cdir),
            "kernel_files": kernel,
            "files": files,
            "original_test_command": op.test,
            "original_benchmark_command": op.benchmark,
            "test_command": test,
            "benchmark_command": bench,
        },
    )
    return Extraction(test, bench, files)


def load_workspace(cdir: Path) -> dict[str, Any]:
    path = Path(cdir) / WORKSPACE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CampaignError(f"{path} is missing: this is not a workspace-mode campaign") from None


# -- rounds in the workspace -------------------------------------------------------------------
def ambient(c: Campaign) -> dict[str, str | None]:
    """Fingerprints of the workspace's files outside kernel_source (the scope guard's view):
    src/, tests/ and bench/, without caches and run outputs (.pyc, .csv, .log)."""
    kernel = {f"src/{k}" for k in c.m.kernel_source}
    out: dict[str, str | None] = {}
    for sub in ("src", "tests", "bench"):
        base = c.dir / sub
        if not base.is_dir():
            continue
        for p in base.rglob("*"):
            rel = p.relative_to(c.dir)
            if not p.is_file() or _SKIP_DIRS & set(rel.parts) or p.suffix in _OUTPUTS:
                continue
            if rel.as_posix() not in kernel:
                out[rel.as_posix()] = file_sha256(p)
    return out


def candidate_diff(c: Campaign) -> str:
    """Unified diff of the workspace kernel files against the incumbent's snapshot."""
    from kernel_ratchet.campaign.rounds import incumbent_bytes

    chunks = []
    for rel in c.m.kernel_source:
        old = incumbent_bytes(c, rel)
        path = c.root / rel
        new = path.read_bytes() if path.exists() else None
        if old == new:
            continue
        a = (old or b"").decode("utf-8").splitlines(keepends=True)
        b = (new or b"").decode("utf-8").splitlines(keepends=True)
        chunks.append("".join(difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}")))
    return "".join(chunks)


# -- sync-back ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SyncResult:
    """The outcome of ``sync_back``; ``ok`` is the integration gate's verdict."""

    ok: bool
    round: int
    files: tuple[str, ...]
    commit: str | None
    details: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "round": self.round,
            "files": list(self.files),
            "commit": self.commit,
            "details": list(self.details),
        }


def _upstream_changes(c: Campaign, ws: dict[str, Any], incumbent: dict[str, bytes | None]):
    """Kernel files whose project copy is neither the extracted one nor the incumbent's."""
    root, groot = c.profile.root, c.groot
    changed = []
    for rel, extracted in ws["kernel_files"].items():
        path = root / rel
        cur = file_sha256(path) if path.exists() else None
        head = git.show(groot, "HEAD", os.path.relpath(root / rel, groot))
        inc = incumbent[rel]
        allowed = {extracted, None if inc is None else _sha(inc)}
        head_sha = None if head is None else _sha(head)
        if cur not in allowed or head_sha not in allowed:
            changed.append(rel)
    return changed


def _sha(data: bytes) -> str:
    from kernel_ratchet.campaign.fsutil import sha256_bytes

    return sha256_bytes(data)


def _write_kernel(root: Path, rel: str, data: bytes | None) -> None:
    path = root / rel
    if data is None:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, data.decode("utf-8"))


def sync_back(c: Campaign, *, commit: bool = True) -> SyncResult:
    """Apply the incumbent's kernel files to the project and re-validate them there.

    Preconditions (CampaignError otherwise): a workspace-mode campaign with an accepted round,
    no round in flight, and project kernel files unchanged upstream since extraction (or
    already holding the incumbent, when an earlier sync-back was interrupted). The gate: the
    original focused test passes in the project and a project-rooted harness measures every
    target shape with Check=PASS and an aggregate above the baseline's. On PASS the kernel
    files (only them) are committed when ``commit``; on FAIL they are restored.
    """
    from kernel_ratchet.campaign.rounds import incumbent_bytes

    if not is_workspace(c.m):
        raise CampaignError(
            f"{c.m.campaign} is a {c.m.execution_mode}-mode campaign: its "
            "accepted rounds are commits in the project already"
        )
    c.recover()
    st = c.state
    if st.phase.value == "INITIALIZED" or not st.incumbent_round or st.incumbent_round < 2:
        raise CampaignError("no accepted round to sync back yet: the incumbent is the baseline")
    ws = load_workspace(c.dir)
    n = st.incumbent_round
    incumbent = {rel: incumbent_bytes(c, rel) for rel in c.m.kernel_source}
    changed = _upstream_changes(c, ws, incumbent)
    if changed:
        raise CampaignError(
            f"the project's kernel files changed upstream since extraction at "
            f"{ws['upstream_commit'][:12]}: {', '.join(changed)}. Sync-back would overwrite "
            f"that work: port round-{n}'s change by hand (rounds/round-{n}/kernel_snapshot, "
            "artifacts/candidate.diff) or start a new workspace campaign from the current project"
        )
    root = c.profile.root
    before = {
        rel: (root / rel).read_bytes() if (root / rel).exists() else None
        for rel in c.m.kernel_source
    }
    for rel, data in incumbent.items():
        if before[rel] != data:
            _write_kernel(root, rel, data)
    ok, details, after = _revalidate(c, ws)
    sha = None
    kernel_git = [os.path.relpath(root / k, c.groot) for k in c.m.kernel_source]
    if ok and commit:
        sha = _commit(c, n, kernel_git, after)
    elif not ok:
        for rel, data in before.items():
            _write_kernel(root, rel, data)
        details.append("- The project's kernel files were restored to their state before sync-back")
    res = SyncResult(ok, n, tuple(c.m.kernel_source), sha, tuple(details))
    atomic_write_json(c.dir / SYNC_DIR / "result.json", {**res.to_dict(), "finished": now()})
    c.log("logs/optimize.md").append(
        f"## Sync-back of round-{n} ({now()}) — {'PASSED' if ok else 'FAILED'}\n"
        + "\n".join(details)
        + (f"\n- Commit: {sha}" if sha else "")
        + "\n\n"
    )
    c.save()
    return res


def _revalidate(c: Campaign, ws: dict[str, Any]) -> tuple[bool, list[str], float | None]:
    """Focused test + harness on all target shapes, both run in the project."""
    from kernel_ratchet.campaign.closing import vs_base
    from kernel_ratchet.campaign.create import write_harness
    from kernel_ratchet.campaign.rounds import HARNESS_TIMEOUT_S, TEST_TIMEOUT_S
    from kernel_ratchet.campaign.steps import python_command, run_step
    from kernel_ratchet.scoring.metrics import aggregates

    root, m, out = c.profile.root, c.m, c.dir / SYNC_DIR
    out.mkdir(parents=True, exist_ok=True)
    c.say(f"sync-back: focused test in the project ({ws['original_test_command']})")
    t = run_step(
        "focused test",
        ws["original_test_command"],
        cwd=root,
        log_path=out / "test.log",
        timeout_s=TEST_TIMEOUT_S,
    )
    details = [f"- Focused test in the project: {'PASS' if t.ok else 'FAIL'} ({t.reason})"]
    if not t.ok:
        return False, details, None
    harness = out / "quick_test_bench.py"
    write_harness(out, m, root, shapes=m.representative_shape_dicts, target_shapes=m.target_shapes)
    csv = out / "benchmark.csv"
    c.say(f"sync-back: harness in the project on all {len(m.target_shapes)} target shapes")
    h = run_step(
        "harness",
        python_command(harness, "--level", "full", "--summary-csv", str(csv)),
        cwd=root,
        log_path=out / "harness.log",
        timeout_s=HARNESS_TIMEOUT_S,
    )
    if not h.ok or not csv.exists():
        return False, [*details, f"- Harness in the project: FAIL ({h.reason})"], None
    table = c.table(c.rel(csv))
    failed = [r.label for r in table.rows if not r.passed]
    missing = sorted({s["label"] for s in m.target_shapes} - {r.label for r in table.rows})
    step, fwd, _ = vs_base(c, table)
    gain = fwd if m.campaign_type == "compute_fwd" else step
    agg = aggregates(table, m.campaign_type).primary_avg
    ok = not failed and not missing and gain is not None and gain > 0
    details.append(
        f"- Harness in the project ({c.rel(csv)}): {len(table.rows) - len(failed)}/"
        f"{len(table.rows)} shapes PASS"
        + (f"; FAIL: {', '.join(failed)}" if failed else "")
        + (f"; missing: {', '.join(missing)}" if missing else "")
        + f"; {m.primary_metric} aggregate {agg:.4g}, vs baseline "
        + ("-" if gain is None else f"{gain * 100:+.2f}%")
        + ("" if ok or failed or missing else " (no gain in the project: not synced)")
    )
    return ok, details, agg


def _commit(c: Campaign, n: int, kernel_git: list[str], after: float | None) -> str | None:
    from kernel_ratchet.campaign.record import read_record
    from kernel_ratchet.campaign.records import commit_message
    from kernel_ratchet.scoring.metrics import aggregates

    rec = read_record(c.round_dir(n) / "round.json")
    baseline = c.baseline_table()
    before = aggregates(baseline, c.m.campaign_type).primary_avg
    msg = commit_message(
        c.m.target_op,
        c.m.target_backend,
        n,
        f"{rec.summary or rec.hypothesis} (workspace sync-back)",
        rec.hypothesis,
        before,
        after or before,
        f"{os.path.relpath(c.dir, c.groot)}/logs/optimize.md",
    )
    return git.commit_only(c.groot, kernel_git, msg) or git.head(c.groot)
