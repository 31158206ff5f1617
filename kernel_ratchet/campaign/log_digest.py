"""What a failed command's log says went wrong, in one line for a round's reason."""

from __future__ import annotations

import re
from pathlib import Path

from kernel_ratchet.harness.interpreter import hint

#: pytest's short summary lines (``-rfE``, its default): ``FAILED node - message``.
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+(?:\[.*?\])?)(?: - (.*))?$")
#: The first line of an exception in pytest's report (``E   ValueError: ...``).
_E_LINE = re.compile(r"^E\s{2,}(\S.*)$")
#: The source line pytest marks in a traceback (``>       assert a == b``).
_SOURCE = re.compile(r"^>\s+(\S.*)$")
#: Where a failure's traceback ends (``tests/a.py:12: AssertionError``; inner frames end
#: ``tests/a.py:8: `` with no exception named).
_WHERE = re.compile(r"^(\S+\.py:\d+): ([A-Za-z_][\w.]*)$")
_MAX = 160


def _clip(text: str, n: int = _MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _first_failure_site(lines: list[str]) -> str:
    """``"tests/a.py:12: assert a == b"``: where the first failure in a pytest report was
    raised and the source line pytest marked there; ``""`` when the log has no traceback."""
    source = ""
    for ln in lines:
        src = _SOURCE.match(ln)
        if src:
            source = src.group(1)
        where = _WHERE.match(ln)
        if where and source:
            return f"{where.group(1)}: {source}"
    return ""


def _lines(log: str | Path) -> list[str] | None:
    try:
        return Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def failed_nodes(log: str | Path) -> tuple[str, ...]:
    """Every node id a pytest log's short summary names as FAILED or ERROR, in its order;
    ``()`` for a log of another command, a missing log or a run where nothing failed."""
    found = (_SUMMARY.match(ln) for ln in _lines(log) or ())
    return tuple(dict.fromkeys(m.group(2) for m in found if m))


def failure_digest(log: str | Path, most: int = 3) -> str:
    """``"2 failed: tests/a.py::t[x], tests/b.py::u; first error: ValueError: ... (at
    tests/a.py:12: raise ValueError(x))"`` from a pytest log (the site: the first failure's
    traceback, where the report has one); for any other command its last non-empty line;
    ``""`` when the log is missing or empty. At most ``most`` node ids are named (all of them:
    :func:`failed_nodes`)."""
    lines = _lines(log)
    if lines is None:
        return ""
    nodes: list[str] = []
    first_error = ""
    for ln in lines:
        m = _SUMMARY.match(ln)
        if m:
            nodes.append(m.group(2))
            first_error = first_error or (m.group(3) or "")
        e = _E_LINE.match(ln)
        if e and not first_error:
            first_error = e.group(1)
    if nodes:
        named = ", ".join(nodes[:most]) + (
            f" and {len(nodes) - most} more" if len(nodes) > most else ""
        )
        why = f"; first error: {_clip(first_error)}" if first_error else ""
        site = _first_failure_site(lines)
        if site:
            why = (why or "; first error:") + f" (at {_clip(site)})"
        todo = hint(first_error)
        return f"{len(nodes)} failed: {named}{why}" + (f"; {todo}" if todo else "")
    # the step's own header (its command and folder) is not what the command said
    said = [ln for ln in lines if ln.strip() and not ln.startswith(("$ ", "# cwd: "))]
    if not said:
        return ""
    fails = [ln for ln in said if ln.startswith("FAIL ")]  # e.g. the built-in focused check's
    first = f"; first: {_clip(fails[0])}" if fails and fails[0] != said[-1] else ""
    return _clip(said[-1]) + first
