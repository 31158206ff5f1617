"""Whether an op's focused test names test paths that exist and selects tests from each.

A focused test such as ``pytest tests/a.py tests/b.py -k "bf16"`` passes when ``a.py`` has
matching tests, even if the ``-k`` expression deselects every test of ``b.py``: the gate then
never runs ``b.py``, and nothing says so. Where the command is a plain pytest call with a
selection (``-k``, ``-m`` or a ``::`` node id), pytest collects it (``--collect-only``, nothing
run) and each named test path must keep at least one test. Any other command is read for
what would fail the baseline at once: a script it runs that is not there (``python x.py``,
``bash x.sh``, ``./x``), or an op ``kernel_ratchet.profile.focused`` checks that the profile
does not describe.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from kernel_ratchet.profile.items import CheckItem
from kernel_ratchet.profile.items import item as _item
from kernel_ratchet.profile.schema import OpProfile, Profile

WHAT = "focused test selects tests from each file it names"
FOCUSED = "kernel_ratchet.profile.focused"
_COLLECT_TIMEOUT_S = 120
_SHELL = {"&&", "||", ";", "|", "&", ">", "<", "2>&1"}
_VALUED = {
    "-k",
    "-m",
    "-p",
    "-n",
    "-c",
    "-o",
    "-W",
    "--rootdir",
    "--dist",
    "--maxfail",
    "--deselect",
    "--ignore",
    "--ignore-glob",
    "--basetemp",
    "--junitxml",
    "--confcutdir",
}


def command_words(command: str) -> list[str] | None:
    """The words of one plain command, leading ``FOO=1`` assignments dropped; None for shell
    syntax (several commands, redirections) or unbalanced quotes."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if any(w in _SHELL for w in words):
        return None
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]  # FOO=1 pytest ...
    return words


def pytest_args(command: str) -> list[str] | None:
    """The arguments after ``pytest`` / ``python -m pytest``, or None for any other command
    (several commands, a wrapper script, shell syntax)."""
    words = command_words(command)
    if words is None:
        return None
    if words and Path(words[0]).name == "pytest":
        return words[1:]
    if (
        len(words) > 2
        and Path(words[0]).name.startswith("python")
        and words[1:3] == ["-m", "pytest"]
    ):
        return words[3:]
    return None


def named_paths(args: list[str], root: Path) -> list[str]:
    """The test files and directories the arguments name (node ids reduced to their file)."""
    return [path for path, _ in _path_words(args) if (root / path).exists()]


def missing_paths(args: list[str], root: Path) -> list[str]:
    """The test paths the arguments name that do not exist under ``root``: a word that follows
    an option pytest may read a value for counts only where it names a ``.py`` file."""
    if "--pyargs" in args:  # module names, not paths
        return []
    return [
        path
        for path, after_option in _path_words(args)
        if not (root / path).exists() and (not after_option or path.endswith(".py"))
    ]


def _path_words(args: list[str]) -> list[tuple[str, bool]]:
    """The words that may name a path (node ids reduced to their file), neither an option nor
    the value of one in :data:`_VALUED`; each with whether it follows another option (whose
    value it may be)."""
    words, prev = [], ""
    for a in args:
        path = a.split("::", 1)[0]
        if prev not in _VALUED and not a.startswith("-") and path:
            words.append((path, prev.startswith("-") and "=" not in prev))
        prev = a
    return words


def _selects(args: list[str]) -> bool:
    return any(a in ("-k", "-m") or a.startswith(("-k", "-m")) for a in args) or any(
        "::" in a for a in args
    )


def _node_file(node: str, root: Path) -> Path | None:
    """The file of a node id, which pytest writes relative to its rootdir: ``root`` or one of
    its parents."""
    file = node.split("::", 1)[0]
    for base in (root, *root.parents):
        if (base / file).is_file():
            return (base / file).resolve()
    return None


def _under(file: Path | None, path: Path) -> bool:
    return file is not None and (file == path or path in file.parents)


def selection_check(profile: Profile, op: OpProfile) -> CheckItem | None:
    """None where there is nothing to check (not a plain pytest call, no selection)."""
    args = pytest_args(op.test or "")
    if args is None:
        return _other_command(profile, op)
    if missing := missing_paths(args, profile.root):
        return _missing(profile, op, missing, "where pytest runs")
    if not _selects(args):
        return None
    paths = named_paths(args, profile.root)
    if not paths:
        return None
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            [*cmd, *args, "--verbosity=-1"],  # one node id per line, whatever -q/-v it has
            cwd=profile.root,
            capture_output=True,
            text=True,
            timeout=_COLLECT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return _warning(op, f"collecting it took over {_COLLECT_TIMEOUT_S} s; not checked")
    if done.returncode not in (0, 5):  # 5: nothing collected, judged below per path
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        return _warning(op, f"pytest could not collect it here (exit {done.returncode}): {tail}")
    nodes = [line for line in done.stdout.splitlines() if "::" in line]
    files = {_node_file(n, profile.root) for n in nodes}
    empty = [p for p in paths if not any(_under(f, (profile.root / p).resolve()) for f in files)]
    if empty:
        return _item(
            op,
            WHAT,
            False,
            f"no test of {', '.join(empty)} is selected by `{op.test}`: "
            "a round would never run them",
            f"widen the -k/-m selection of ops.{op.name}.test in {profile.path.name} "
            "(e.g. add the file's name to -k), or remove the file from the command",
        )
    return _item(op, WHAT, True, f"{len(nodes)} tests from {len(paths)} path(s)")


def _missing(profile: Profile, op: OpProfile, missing: list[str], where: str) -> CheckItem:
    return _item(
        op,
        "focused test's paths exist",
        False,
        f"{', '.join(missing)}: named by `{op.test}`, not found under {profile.root.name}/ "
        f"({where}); the baseline would fail",
        f"correct the path in ops.{op.name}.test in {profile.path.name}",
    )


def _other_command(profile: Profile, op: OpProfile) -> CheckItem | None:
    """A command that is not a plain pytest call: the script it runs (``python x.py``,
    ``bash x.sh``, ``./x``) must exist, and the op ``kernel_ratchet.profile.focused`` checks
    must be one of the profile's. None where there is nothing to check."""
    words = command_words(op.test or "")
    if words is None:
        return None
    if len(words) > 3 and words[1:3] == ["-m", FOCUSED]:
        if words[3] in profile.ops or "--profile" in words:  # another profile's op
            return None
        return _item(
            op,
            "focused test names a known op",
            False,
            f"`{op.test}` checks op {words[3]!r}, which {profile.path.name} does not "
            f"describe (its ops: {', '.join(profile.ops)}); the baseline would fail",
            f"name one of them in ops.{op.name}.test in {profile.path.name}",
        )
    script = _script(words)
    if script is None or (profile.root / script).exists():
        return None
    return _missing(profile, op, [script], "where the command runs")


def _script(words: list[str]) -> str | None:
    """The file a ``python``/``bash``/``sh`` call runs, or the relative path run directly."""
    if words and words[0].startswith("./"):
        return words[0]
    runner = Path(words[0]).name if words else ""
    if (runner.startswith("python") or runner in ("bash", "sh")) and len(words) > 1:
        first = words[1]  # an option first (-m, -c, -u) runs no file of the project
        return None if first.startswith("-") or Path(first).is_absolute() else first
    return None


def _warning(op: OpProfile, detail: str) -> CheckItem:
    return CheckItem(f"{op.name}: {WHAT}", True, detail, warning=True)
