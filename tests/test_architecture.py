"""The package's shape: layered imports without cycles, small files (its tests' too), small
functions.

The import contracts live in ``pyproject.toml`` (``[tool.importlinter]``) so ``lint-imports``
reports the same thing from the command line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kernel_ratchet"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_import_contract_in_pyproject_is_kept(monkeypatch):
    importlinter_cli = pytest.importorskip("importlinter.cli")
    monkeypatch.chdir(ROOT)
    exit_code = importlinter_cli.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    assert exit_code == 0, "`lint-imports` names the imports that break a contract"


@pytest.mark.parametrize("place", [PACKAGE, ROOT / "tests"], ids=["package", "tests"])
def test_no_file_is_over_the_line_limit(place):
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted(place.rglob("*.py"))
        if (n := p.read_text().count("\n")) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_outside_the_kernels_is_over_the_line_limit():
    long = {}
    for path in _sources():
        if "kernels" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = length
    assert long == {}


#: Traces of where and when the product was built (allocations, run plans, issue numbers,
#: dates): the package and its docs talk about the product and its users only.
WORKSHOP_TRACE = re.compile(
    r"(^|[^e])lease|device call|issue [0-9]|20[0-9]{2}-[0-9]{2}-[0-9]{2}", re.I
)


def test_the_package_and_docs_speak_of_the_product_alone():
    places = [PACKAGE, ROOT / "docs", ROOT / "README.md", ROOT / "scripts", ROOT / "examples"]
    files = [
        p
        for place in places
        if place.exists()
        for p in ([place] if place.is_file() else place.rglob("*"))
    ]
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()[:80]}"
        for p in files
        if p.is_file() and p.suffix in {".py", ".md", ".sh", ".yaml", ".j2", ".plan", ".txt", ""}
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if WORKSHOP_TRACE.search(line)
    ]
    assert hits == []
