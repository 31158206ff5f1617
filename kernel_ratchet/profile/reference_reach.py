"""Whether a round can change the op's truth: the files its reference reads, read by ``ast``.

Every round is checked against the reference. Where the reference is defined in, or imports
from, a file a round may change (``kernel_source``), a candidate changes the kernel and its
truth together: a helper ``mean_square`` shared by the kernel file and the reference,
rewritten to read 64 of 1024 columns, keeps both agreeing on a wrong answer, and the round is
accepted. The files the reference's module runs when imported, and those its function's body
imports, are read by :func:`.imports.reach` (which notes how each is reached).

The adapter of an op described by a class holds its reference in its own file (or imports it
from another): :func:`check_reach` refuses an adapter file that a round may change, and the
described op's ``reference`` module with everything it reaches.
"""

from __future__ import annotations

from pathlib import Path

from kernel_ratchet.harness.described_spec import description_of
from kernel_ratchet.profile.imports import Found, Reach, module_file, reach
from kernel_ratchet.profile.items import CheckItem, item
from kernel_ratchet.profile.schema import OpProfile, Profile


def _of_reference(root: Path, reference: str) -> Found:
    """:func:`reach` of a reference ``module:function``."""
    module, _, function = reference.partition(":")
    return reach(root, module, function.split(".", 1)[0] or None, "the reference's module")


def changeable_truth(root: Path, reference: str, kernel_source: list[str]) -> list[str]:
    """Why each file of ``kernel_source`` that the reference (``module:function``) reaches
    is in its reach; [] when none is."""
    return _in_sources(_of_reference(root, reference), kernel_source)


def _in_sources(found: Found, kernel_source: list[str] | tuple[str, ...]) -> list[str]:
    sources = {Path(s).as_posix() for s in kernel_source}
    return [f"{rel} ({found[rel]})" for rel in found if rel in sources]


def check_reach(profile: Profile, op: OpProfile) -> CheckItem:
    """The checklist line: no file a round may change holds or feeds the op's reference."""
    what = "reference out of a round's reach"
    try:
        desc = description_of(op.adapter)
    except ValueError:  # the loader names a description that does not validate
        return item(op, what, True, "not read (the op's description does not validate)")
    if desc is not None:
        found = _of_reference(profile.root, desc.reference)
        bad = _in_sources(found, op.kernel_source)
        fix = (
            "move what the reference uses into a module outside kernel_source (the kernel may "
            "import from the reference's side, never the other way), or take the file out of "
            f"ops.{op.name}.kernel_source"
        )
        if bad:
            return item(op, what, False, f"{desc.reference} reads {'; '.join(bad)}", fix)
        detail = f"{desc.reference}: {len(found)} project file(s), none in kernel_source"
        return item(op, what, True, detail)
    module = op.adapter.split(":", 1)[0]
    r = Reach(profile.root, module.split(".", 1)[0])
    own_file = module_file(r.bases, module)
    own = r.rel(own_file) if own_file else None
    if own in {Path(s).as_posix() for s in op.kernel_source}:
        return item(
            op,
            what,
            False,
            f"the adapter {module} ({own}), whose reference() is the truth, is in kernel_source",
            f"take {own} out of ops.{op.name}.kernel_source: a round must not change its truth",
        )
    return item(op, what, True, f"the adapter's file {own or module} is not in kernel_source")
