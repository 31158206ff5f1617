"""Which other ops of a profile run the same kernel files (a shared launcher or quantization
module, listed in their ``kernel_source`` or imported by the files listed there), and the
focused tests that cover them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from kernel_ratchet.profile.imports import imported_files
from kernel_ratchet.profile.schema import Profile


def sharing_ops(profile: Profile, target: str, changed: Iterable[str]) -> dict[str, list[str]]:
    """Other ops of ``profile`` -> the files of ``changed`` their ``kernel_source`` lists or its
    Python files import, directly or not (:func:`.imports.imported_files`; paths compared
    normalized, relative to the profile's root); ops running none are left out."""
    want = {os.path.normpath(p) for p in changed}
    out: dict[str, list[str]] = {}
    memo: dict = {}  # ops list many of the same files
    for name, op in profile.ops.items():
        if name == target:
            continue
        listed = [os.path.normpath(p) for p in op.kernel_source]
        imported = imported_files(profile.root, listed, memo)
        reach = set(listed) | {os.path.normpath(p) for p in imported}
        hit = sorted(want & reach)
        if hit:
            out[name] = hit
    return out


def shared_tests(
    profile: Profile, own_test: str, sharing: Mapping[str, list[str]]
) -> list[tuple[str, str]]:
    """``(op, test command)`` to run for the sharing ops: each distinct command once, under the
    first op that has it, and not the campaign's own test again."""
    seen = {own_test.strip()}
    out = []
    for name in sharing:
        cmd = profile.op(name).test.strip()
        if cmd and cmd not in seen:
            seen.add(cmd)
            out.append((name, cmd))
    return out
