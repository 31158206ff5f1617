"""Which Triton kernels an op really launches on a shape.

A kernel file often holds more kernels than an op calls on a given machine and shape (a
Blackwell-only tiled variant, a fused variant another op uses): moving the knobs of a kernel
that never runs costs a round and measures nothing. :func:`recording` notes the name of every
``@triton.jit`` function launched while it is open (compiled or in the interpreter, autotuned
or not); the harness records them for each shape it checks (``launches.json`` beside its CSV),
and the search leaves out the knobs of kernels the BASELINE never launched.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The file beside a harness CSV that names the kernels launched, by shape.
FILE = "launches.json"


def _launcher_classes() -> list[type]:
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # no Triton: nothing is launched through it
        return []
    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


@contextmanager
def recording() -> Iterator[set[str]]:
    """The names of the Triton kernels launched while the block runs (filled as they are)."""
    names: set[str] = set()
    patched = []
    for cls in _launcher_classes():
        original = cls.__dict__.get("run")
        if original is None:
            continue

        def run(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            names.add(getattr(getattr(self, "fn", None), "__name__", "") or repr(self))
            return _original(self, *args, **kwargs)

        cls.run = run
        patched.append((cls, original))
    try:
        yield names
    finally:
        for cls, original in patched:
            cls.run = original


def write(path: Path, by_shape: dict[str, Iterable[str]]) -> None:
    """Write ``{shape label: [kernel names]}``."""
    data = {label: sorted(set(names)) for label, names in by_shape.items()}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def read(path: Path) -> set[str] | None:
    """Every kernel launched on any shape, or None when nothing was recorded (no file, an
    unreadable one, or an op that launched no Triton kernel)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    names = {n for v in data.values() if isinstance(v, list) for n in v if isinstance(n, str)}
    return names or None
