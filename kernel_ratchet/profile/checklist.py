"""The DEFINE_TARGET checklist and the environment checks behind ``ratchet check``.

Contract: every check returns a :class:`CheckItem` (never raises for a failed check), so the
CLI can print the whole list at once. A failed item says what is wrong (``detail``) and what to
do (``fix``). Adapter and shape imports run in-process with the project root first on
``sys.path`` (restored afterwards); the environment check runs in a subprocess so that the
current interpreter's ``sys.path`` cannot hide a missing editable install.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import (
    DESCRIBED_PREFIX,
    INLINE_PREFIX,
    load_adapter,
    load_shapes,
)
from kernel_ratchet.harness.csv_schema import SCHEMAS
from kernel_ratchet.profile.described_check import described_call, integer_bounds
from kernel_ratchet.profile.device_check import device_check, work_check
from kernel_ratchet.profile.import_check import SUBPROCESS_TIMEOUT_S as _SUBPROCESS_TIMEOUT_S
from kernel_ratchet.profile.import_check import env_check
from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.items import item as _item
from kernel_ratchet.profile.on_path import own_code_fix, project_on_path, raised_in_project
from kernel_ratchet.profile.reference_reach import check_reach
from kernel_ratchet.profile.requires import unmet
from kernel_ratchet.profile.schema import (
    CAMPAIGN_TYPES,
    COMPILED_BACKENDS,
    EXECUTION_MODES,
    PRIMARY_METRICS,
    OpProfile,
    Profile,
)
from kernel_ratchet.profile.search_check import search_items
from kernel_ratchet.profile.seed_check import seeded_inputs
from kernel_ratchet.profile.sharing import sharing_ops
from kernel_ratchet.profile.test_selection import selection_check


def _kernel_source(profile: Profile, op: OpProfile) -> CheckItem:
    """Every kernel_source file exists, or is a new one a round may create: its directory
    exists and at least one other kernel_source file does (a missing directory, or no file at
    all, is a path to correct)."""
    root = profile.root
    missing = [p for p in op.kernel_source if not (root / p).is_file()]
    new = [p for p in missing if (root / p).parent.is_dir() and not (root / p).exists()]
    if missing and (missing != new or len(new) == len(op.kernel_source)):
        return _item(
            op,
            "kernel source exists",
            False,
            f"missing file(s): {', '.join(missing)}",
            f"correct ops.{op.name}.kernel_source in {profile.path.name} or create the file(s) "
            "(a file a round will create may be missing if its directory exists and another "
            "kernel_source file does)",
        )
    present = [p for p in op.kernel_source if p not in new]
    later = f"; new, a round may create: {', '.join(new)}" if new else ""
    return _item(op, "kernel source exists", True, ", ".join(present) + later)


def _command(profile: Profile, op: OpProfile, key: str, what: str) -> CheckItem:
    value = getattr(op, key)
    ok = isinstance(value, str) and bool(value.strip())
    return _item(
        op,
        what,
        ok,
        value if ok else "not given",
        f"set ops.{op.name}.{key} in {profile.path.name}",
    )


def _focused_test(profile: Profile, op: OpProfile) -> CheckItem:
    """The focused test command, and where a round runs it (``test_gpu``)."""
    item = _command(profile, op, "test", "focused test command given")
    if not item.ok:
        return item
    where = (
        "every round runs it first, nothing timed beside it (if it needs no GPU, "
        f"ops.{op.name}.test_gpu: false runs it beside the harness and the A/B)"
        if op.test_gpu
        else "every round on a GPU runs it with no GPU visible, beside the harness and the A/B "
        "(a round on the CPU runs it first: the A/B times the CPU)"
    )
    return replace(item, detail=f"{item.detail}; {where}")


def _shown(spec: str) -> str:
    """An adapter or shape-set spec as the user wrote it (not the JSON of a described op)."""
    if spec.startswith(DESCRIBED_PREFIX):
        return "the op described in ratchet.yaml"
    return "the shapes listed in ratchet.yaml" if spec.startswith(INLINE_PREFIX) else spec


def _adapter(profile: Profile, op: OpProfile) -> list[CheckItem]:
    """Two items: the adapter imports, and its schema is known and fits the campaign type."""
    name_imp, name_schema = "adapter importable", "adapter schema"
    try:
        with project_on_path(profile.root):
            adapter = load_adapter(op.adapter)
    except Exception as exc:  # any import-time failure of user code is a failed check
        fix = (
            f"make {_shown(op.adapter)} importable from {profile.root} "
            f"(check ops.{op.name}.adapter or function; "
            f"install the project editable: {profile.install})"
        )
        where = raised_in_project(exc, profile.root)
        if where and not isinstance(exc, ProfileError):
            fix = own_code_fix("the project's own code raised at import", where)
        return [
            _item(op, name_imp, False, f"{_shown(op.adapter)}: {type(exc).__name__}: {exc}", fix),
            _item(
                op,
                name_schema,
                False,
                "unknown (adapter not importable)",
                "make the adapter import first",
            ),
        ]
    imp = _item(op, name_imp, True, f"{_shown(op.adapter)} -> {type(adapter).__name__}")
    schema = getattr(adapter, "schema", None)
    if schema not in SCHEMAS:
        return [
            imp,
            _item(
                op,
                name_schema,
                False,
                f"unknown schema {schema!r}",
                f"set {type(adapter).__name__}.schema to one of {', '.join(sorted(SCHEMAS))}",
            ),
        ]
    if schema != op.schema_name:
        return [
            imp,
            _item(
                op,
                name_schema,
                False,
                f"adapter reports schema {schema!r} but campaign_type {op.campaign_type!r} "
                f"needs {op.schema_name!r}",
                f"set {type(adapter).__name__}.schema = {op.schema_name!r} or fix "
                f"ops.{op.name}.campaign_type",
            ),
        ]
    items = [imp, _item(op, name_schema, True, f"{schema} (fits {op.campaign_type})")]
    return items + _roles_note(op, adapter)


def _roles_note(op: OpProfile, adapter: object) -> list[CheckItem]:
    """A warning for an adapter without ``training_roles``: its transfer check cannot run."""
    if callable(getattr(adapter, "training_roles", None)):
        return []
    detail = (
        f"{type(adapter).__name__} has no training_roles(case): every round's transfer check "
        "(fresh activations each step, the real-training idiom) is NOT-RUN, so a result kept "
        "from an earlier call is judged by the static audit alone; implement it "
        "(docs/adapters.md)"
    )
    return [CheckItem(f"{op.name}: training roles", True, detail, warning=True)]


def _shapes(profile: Profile, op: OpProfile) -> CheckItem:
    try:
        with project_on_path(profile.root):
            shapes = load_shapes(op.shapes)
    except Exception as exc:
        return _item(
            op,
            "shapes loadable",
            False,
            f"{_shown(op.shapes)}: {type(exc).__name__}: {exc}",
            f"make {_shown(op.shapes)} a non-empty list of Shape (check ops.{op.name}.shapes)",
        )
    return _item(op, "shapes loadable", True, f"{_shown(op.shapes)}: {len(shapes)} shape(s)")


def _scoring(profile: Profile, op: OpProfile) -> CheckItem:
    if op.campaign_type not in CAMPAIGN_TYPES:
        return _item(
            op,
            "scoring rule known",
            False,
            f"campaign_type {op.campaign_type!r}",
            f"set ops.{op.name}.campaign_type to one of {', '.join(CAMPAIGN_TYPES)}",
        )
    metric = PRIMARY_METRICS[op.campaign_type]
    if op.campaign_type == "memory":
        metric += " (an op with a backward: Step GB/s, both passes' bytes over their time)"
    return _item(op, "scoring rule known", True, f"{op.campaign_type}: primary {metric}")


def _execution(profile: Profile, op: OpProfile) -> CheckItem:
    what = "execution mode and rebuild decided"
    if op.execution_mode not in EXECUTION_MODES:
        return _item(
            op,
            what,
            False,
            f"execution_mode {op.execution_mode!r}",
            f"set ops.{op.name}.execution_mode to one of {', '.join(EXECUTION_MODES)}",
        )
    compiled = op.backend.upper() in COMPILED_BACKENDS
    if compiled and op.execution_mode == "repo" and not op.rebuild:
        return _item(
            op,
            what,
            False,
            f"{op.backend} is compiled; repo mode without rebuild",
            f"set ops.{op.name}.rebuild, or execution_mode: workspace",
        )
    rebuild = op.rebuild or "no rebuild"
    return _item(op, what, True, f"{op.execution_mode} mode, {rebuild}")


def _shared(profile: Profile, op: OpProfile) -> list[CheckItem]:
    """A note when other ops list this op's kernel files and their tests will not gate it."""
    sharing = sharing_ops(profile, op.name, op.kernel_source)
    if not sharing:
        return []
    who = ", ".join(sorted(sharing))
    gate = "their focused tests gate every round (test_shared: true)"
    if not op.test_shared:
        gate = (
            "a round changing them gates on this op's test only; set "
            f"ops.{op.name}.test_shared: true (or pass ratchet validate --test-shared) to run "
            "theirs too"
        )
    name = f"{op.name}: kernel files shared with other ops"
    return [CheckItem(name, True, f"{who}; {gate}", warning=not op.test_shared)]


def _runs_here(profile: Profile, cannot: str | None) -> CheckItem:
    """The profile's ``requires:`` against this machine; when unmet, the op imports and the
    GPU check are not attempted (they would fail for the same reason)."""
    name = "this machine meets requires:"
    if cannot is None:
        return CheckItem(name, True, str(profile.requires))
    fix = "run the campaign on a machine that has it; the adapter imports were not checked here"
    return CheckItem(name, False, cannot, fix)


def all_checks(profile: Profile, op: str | None = None) -> list[CheckItem]:
    """Everything ``ratchet check`` reports: the checklist, the install, git, the device."""
    items = [*run_checklist(profile, op), env_check(profile), git_check(profile.root)]
    if unmet(profile.requires) is None:
        ops = [op] if op else list(profile.ops)
        items += [device_check(profile, o, warn=True) for o in ops]
        items += [work_check(profile, o) for o in ops]
        # an op whose function does not import is said so once, by 'adapter importable'
        broken = {i.name for i in items if not i.ok and i.name.endswith(": adapter importable")}
        ready = [o for o in ops if f"{o}: adapter importable" not in broken]
        called = (described_call(profile, profile.op(o)) for o in ready)
        items += [c for c in called if c is not None]
        bounds = (integer_bounds(profile.op(o)) for o in ops)
        items += [c for c in bounds if c is not None]
        items += [seeded_inputs(profile, profile.op(o)) for o in ops]
    return items


def run_checklist(profile: Profile, op: str | None = None) -> list[CheckItem]:
    """The DEFINE_TARGET checklist for one op (``op``) or every op (None), in profile order.

    Raises ProfileError only for an unknown op name; every failed check is an item.
    """
    ops = [profile.op(op)] if op is not None else list(profile.ops.values())
    cannot = unmet(profile.requires)
    items: list[CheckItem] = [] if profile.requires is None else [_runs_here(profile, cannot)]
    for o in ops:
        items.append(_kernel_source(profile, o))
        items.append(_focused_test(profile, o))
        if (selected := selection_check(profile, o)) is not None:
            items.append(selected)
        if o.benchmark is not None:  # optional: the harness measures the op without it
            items.append(_command(profile, o, "benchmark", "benchmark command given"))
        if cannot is None:  # importing the op needs what the machine lacks
            items.extend(_adapter(profile, o))
        items.append(check_reach(profile, o))
        items.append(_shapes(profile, o))
        items.append(_scoring(profile, o))
        items.append(_execution(profile, o))
        items.extend(_shared(profile, o))
        items.extend(search_items(profile, o))
    return items


def git_check(root: str | Path) -> CheckItem:
    """Whether ``root`` is inside a git work tree (rollback and lineage need git)."""
    name = "project is a git work tree"
    git = shutil.which("git")
    if git is None:
        return CheckItem(name, False, "git is not on PATH", "install git")
    try:
        proc = subprocess.run(
            [git, "-C", str(root), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            timeout=_SUBPROCESS_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CheckItem(name, False, f"git failed: {exc}", "check that git runs")
    if proc.returncode == 0 and proc.stdout.strip() == "true":
        return CheckItem(name, True, str(root))
    return CheckItem(
        name,
        False,
        f"{root} is not inside a git work tree",
        f"run 'git init' in {root} and commit the project, or move ratchet.yaml into one",
    )
