"""The import watch: project code replaced in memory after its import is reported; a module
changing its own state is not."""

from __future__ import annotations

import importlib
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_ratchet.harness.import_watch import ImportWatch, describe

_REFERENCE = """
    import math

    _kernel = None


    def ref(x):
        return x * 2


    def build():
        global _kernel
        _kernel = lambda x: x  # noqa: E731  (a lazily built kernel: its own state)
        return _kernel


    def _fast(x):
        return x + 2


    def _pick(x):
        global _impl
        _impl = _fast  # a dispatcher swapping itself for what it picked: its own state
        return _impl(x)


    _impl = _pick


    class Adapter:
        def reference(self, x):
            return ref(x)
"""

_USER = """
    from wpkg.reference import Adapter, ref
"""


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[ImportWatch, types.ModuleType, types.ModuleType]]:
    pkg = tmp_path / "wpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reference.py").write_text(textwrap.dedent(_REFERENCE))
    (pkg / "user.py").write_text(textwrap.dedent(_USER))
    sys.path.insert(0, str(tmp_path))
    watch = ImportWatch(str(tmp_path)).install()
    try:
        user = importlib.import_module("wpkg.user")
        yield watch, sys.modules["wpkg.reference"], user
    finally:
        sys.meta_path.remove(watch)
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "wpkg" or n.startswith("wpkg.")]:
            del sys.modules[name]


def test_an_untouched_project_and_its_own_state_changes_pass(watched) -> None:
    watch, reference, _ = watched
    assert {"wpkg", "wpkg.reference", "wpkg.user"} <= set(watch.modules)
    reference.build()  # rebinds a name that held None: the module's own state
    reference._impl(3)  # rebinds a name to another function the module's file defines
    assert watch.replaced() == [] and watch.unlike_files() == []


@pytest.mark.parametrize(
    ("patch", "label"),
    [
        (lambda ref, user: setattr(ref, "ref", lambda x: x), "wpkg.reference.ref"),
        (lambda ref, user: setattr(user, "ref", lambda x: x), "wpkg.user.ref"),
        (lambda ref, user: setattr(ref.Adapter, "reference", len), "reference.Adapter.reference"),
        (lambda ref, user: setattr(ref.ref, "__code__", (lambda x: x).__code__), "reference.ref"),
        (lambda ref, user: setattr(ref, "math", types.ModuleType("math")), "reference.math"),
        (lambda ref, user: delattr(ref, "ref"), "wpkg.reference.ref"),
        (
            lambda ref, user: sys.modules.__setitem__("wpkg.fake", types.ModuleType("wpkg.fake")),
            "sys.modules['wpkg.fake']",
        ),
    ],
    ids=["function", "imported-name", "method", "code", "module", "deleted", "fake-module"],
)
def test_a_replacement_after_the_import_is_named(watched, patch, label: str) -> None:
    watch, reference, user = watched
    patch(reference, user)
    found = watch.replaced()
    assert any(label in f for f in found), found
    assert "reference" in describe(found)


def test_third_party_files_under_the_root_are_not_watched(tmp_path: Path) -> None:
    watch = ImportWatch(str(tmp_path))
    assert watch.is_project(str(tmp_path / "pkg" / "mod.py"))
    assert not watch.is_project(str(tmp_path / ".venv/lib/site-packages/torch/__init__.py"))
    assert not watch.is_project("/elsewhere/mod.py")
    assert not watch.is_project(None)


def test_functions_hold_the_code_of_their_files_until_a_file_differs(watched) -> None:
    watch, reference, _ = watched
    reference.build()
    assert watch.unlike_files() == []
    path = Path(reference.__file__)
    path.write_text(path.read_text().replace("x * 2", "x * 3"))  # edited after the import
    found = watch.unlike_files()  # the function, and its name imported by wpkg.user
    assert set(found) == {
        f"wpkg.{m}.ref (not the code of reference.py)" for m in ("reference", "user")
    }


def test_a_module_run_from_swapped_text_then_put_back_is_named(watched) -> None:
    """A candidate writes another reference.py, reloads the module and restores the file's
    text and modification time: the tree is clean, the module in memory is not its file."""
    import os

    from kernel_ratchet.harness.import_watch import describe_unlike

    watch, reference, _ = watched
    path = Path(reference.__file__)
    text, st = path.read_text(), os.stat(path)
    path.write_text(text.replace("x * 2", "x + 0"))
    importlib.reload(reference)
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert reference.ref(3) == 3 and watch.replaced() == []  # recorded again on reload
    found = watch.unlike_files()
    assert any(f.startswith("wpkg.reference.ref ") for f in found), found
    assert "put back" in describe_unlike(found)


def test_a_library_function_the_reference_imported_by_name_is_watched(watched) -> None:
    import math as _math

    watch, reference, _ = watched
    reference.sqrt = _math.sqrt  # as a `from math import sqrt` binds it
    watch.record(reference)  # recorded as its import would have ended
    assert watch.replaced() == []
    reference.sqrt = lambda x: 1.0  # the reference now computes with a constant
    assert any("wpkg.reference.sqrt" in f for f in watch.replaced())


def test_a_function_built_by_exec_where_its_file_defines_one_is_named(watched) -> None:
    """The reference's file swapped for one that builds ``ref`` with exec while imported: the
    code names no file, so comparing with a file cannot see it; its own file defines ``ref``."""
    watch, reference, _ = watched
    exec(compile("def ref(x):\n    return x\n", "<generated>", "exec"), vars(reference))
    exec(compile("def helper(x):\n    return x\n", "<generated>", "exec"), vars(reference))
    watch.record(reference)  # as a reload from the swapped file would
    found = watch.unlike_files()
    assert any(f.startswith("wpkg.reference.ref (built from text") for f in found), found
    assert not any("helper" in f for f in found)  # a helper its file does not define
