"""The library objects a candidate could replace to fake a check, an input or a time.

The worker checks outputs, draws inputs and summarizes timings with torch and the standard
library in the candidate's own process. Replacing ``torch.allclose`` or ``Tensor.__sub__``
makes any output compare equal; replacing ``torch.Tensor.__matmul__`` can make the
reference agree with a wrong output; ``torch.randn`` ignoring its generator makes every
"fresh" input the same (and a cached result right); ``statistics.median``, ``json.dumps`` or
``random.Random.sample`` can shrink a reported time or switch the spot checks off.
:class:`~kernel_ratchet.harness.anticheat.Sentinel` keeps, by identity, every entry listed
here when the worker starts (before the project is imported), and for a Python function what
it runs (:func:`body`), and names any that changed.

A replacement that wraps the original and is defined in torch itself (torch wraps a few of
its functions in ``torch._disable_dynamo`` when ``torch._dynamo`` is first imported) is not a
patch: :func:`library_rewrap`.
"""

from __future__ import annotations

import hashlib
import json
import json.decoder
import json.encoder
import math
import os
import random
import secrets
import statistics
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional
import torch.random
import torch.testing
from torch.utils._device import DeviceContext

Entry = tuple[Any, str, str, bool]  # owner, name, label, watched even where absent


def _functions(owner: Any, label: str) -> Iterator[Entry]:
    for name, value in list(vars(owner).items()):
        if callable(value) and not isinstance(value, types.ModuleType):
            yield owner, name, f"{label}.{name}", False


def _everything(owner: Any, label: str) -> Iterator[Entry]:
    for name in list(vars(owner)):
        if name not in ("__dict__", "__weakref__", "__doc__"):
            yield owner, name, f"{label}.{name}", False


def library_surface() -> list[Entry]:
    """The entries to keep: torch's tensor classes whole (a name of ``TensorBase`` added to
    ``Tensor`` would shadow it), torch's functions, and the standard library the worker reads."""
    tensor, base = torch.Tensor, torch._C.TensorBase
    out = [*_everything(tensor, "torch.Tensor"), *_everything(base, "TensorBase")]
    out += [(tensor, n, f"torch.Tensor.{n}", True) for n in vars(base) if n not in vars(tensor)]
    out += [*_everything(torch.Generator, "torch.Generator")]
    for mod in (torch, torch.nn.functional, torch.linalg, torch.random, torch.testing):
        out += _functions(mod, mod.__name__)
    for mod in (random, statistics, json, json.encoder, json.decoder, hashlib, secrets, math):
        out += _functions(mod, mod.__name__)
    for klass in (random.Random, random.SystemRandom, json.JSONEncoder, json.JSONDecoder):
        out += _functions(klass, f"{klass.__module__}.{klass.__name__}")
    # a device context is the one torch mode the Sentinel lets stand: its own methods only
    out += [*_everything(DeviceContext, "torch.utils._device.DeviceContext")]
    out += [(json, "_default_encoder", "json._default_encoder", False)]
    out += [(os, "urandom", "os.urandom", False)]
    return out


_TORCH_DIR = Path(torch.__file__).resolve().parent
_EMPTY = object()  # an empty closure cell


def _function(value: Any) -> types.FunctionType | None:
    fn = getattr(value, "__func__", value)  # a method, staticmethod or classmethod: its function
    return fn if isinstance(fn, types.FunctionType) else None


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


def body(value: Any) -> tuple[Any, ...] | None:
    """What a Python function runs: its code, defaults and keyword defaults (by identity), and
    for the harness's own functions what their closure cells hold; None for anything else."""
    fn = _function(value)
    if fn is None:
        return None
    own = (fn.__module__ or "").startswith("kernel_ratchet.harness")
    cells = tuple(id(_cell(c)) for c in fn.__closure__ or ()) if own else ()
    return (fn.__code__, id(fn.__defaults__), id(fn.__kwdefaults__), cells)


def put_body(value: Any, kept: tuple[Any, ...]) -> None:
    """Give a kept function its code back (defaults and cells cannot be rebuilt from what was
    kept: a cheat that changed those is already refused, and the worker exits)."""
    fn = _function(value)
    if fn is not None and fn.__code__ is not kept[0]:
        fn.__code__ = kept[0]


def library_rewrap(value: Any, original: Any) -> bool:
    """Whether ``value`` is torch's own wrapper of ``original`` (``functools.wraps``, defined
    in a file of the torch package)."""
    if getattr(value, "__wrapped__", None) is not original:
        return False
    code = getattr(value, "__code__", None)
    if code is None:
        return False
    return _TORCH_DIR in Path(code.co_filename).resolve().parents
