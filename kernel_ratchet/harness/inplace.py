"""Ops that write their results into their inputs (``inplace_outputs``).

An op may declare case fields it writes its results into: a backward that writes dX into the
incoming gradient dY, or into the saved activations it no longer needs (an in-place SwiGLU
backward writes da and db into a and b). For such fields :class:`InPlace`

* keeps a copy of each field's values before the op ran (:meth:`InPlace.keep`: the inputs as
  built, and fields the first forward adds, such as an incoming gradient),
* writes them back before a call that must see them again (:meth:`InPlace.restore`),
* lends them to the reference, which must see the inputs the op saw, not its results
  (:meth:`InPlace.as_kept`: the case's attributes are swapped, the op's outputs that live in
  the fields are left untouched),
* names their paths and storages, which the input-modification checks skip.

The anti-cheat checks that rest on fresh outputs (the NaN poison and its rewrite check, an
output storage returned again, spot checks of timed calls against a reference) cannot apply to
a result that lives in an input: they are skipped for these fields only. A declared field is
part of ``ratchet.yaml`` or the adapter, both outside a candidate's scope.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch


def _get(case: Any, name: str) -> Any:
    return case.get(name) if isinstance(case, Mapping) else getattr(case, name, None)


def _set(case: Any, name: str, value: Any) -> None:
    if isinstance(case, Mapping):
        case[name] = value  # type: ignore[index]
        return
    try:
        setattr(case, name, value)
    except AttributeError:  # a frozen dataclass: rebound as its own __init__ binds fields
        try:
            object.__setattr__(case, name, value)
        except (AttributeError, TypeError) as exc:
            raise TypeError(
                f"in-place field {name!r} of a {type(case).__name__} case cannot be rebound for "
                "the reference: make the case an object with attributes, a dataclass or a dict"
            ) from exc


@dataclass
class InPlace:
    """The in-place fields of one case and their values before the op ran."""

    names: tuple[str, ...]
    kept: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def of(cls, adapter: Any) -> InPlace | None:
        """The adapter's in-place fields, or None when it declares none."""
        names = tuple(getattr(adapter, "inplace_outputs", ()) or ())
        return cls(names) if names else None

    def fields(self, case: Any) -> list[tuple[str, torch.Tensor]]:
        """(name, tensor) of each declared field the case holds now."""
        out = []
        for name in self.names:
            t = _get(case, name)
            if isinstance(t, torch.Tensor):
                out.append((name, t))
        return out

    def keep(self, case: Any, refresh: bool = False) -> InPlace:
        """Copy the fields' current values (only those not kept yet, unless ``refresh``)."""
        with torch.no_grad():
            for name, t in self.fields(case):
                if refresh or name not in self.kept:
                    self.kept[name] = t.detach().clone()
        return self

    def restore(self, case: Any) -> None:
        """Write the kept values back into the fields' tensors (same objects). Through
        ``.data``: the tensors' version counters do not move, so an autograd graph that saved
        them (views of them made inside a custom Function) still runs its backward."""
        with torch.no_grad():
            for name, t in self.fields(case):
                if name in self.kept:
                    t.data.copy_(self.kept[name])

    @contextmanager
    def as_kept(self, case: Any) -> Iterator[Any]:
        """The case with each kept field bound to its kept values while the block runs."""
        swapped = [(name, t) for name, t in self.fields(case) if name in self.kept]
        for name, _ in swapped:
            _set(case, name, self.kept[name])
        try:
            yield case
        finally:
            for name, t in swapped:
                _set(case, name, t)

    def paths(self) -> frozenset[str]:
        """The fields' paths as :func:`kernel_ratchet.harness.anticheat.tensors` names them."""
        return frozenset({f"case.{n}" for n in self.names} | {f"case[{n!r}]" for n in self.names})

    def storages(self, case: Any) -> set[int]:
        """The storage addresses of the fields' tensors (an output there is in place)."""
        return {t.untyped_storage().data_ptr() for _, t in self.fields(case) if t.numel()}


def first_forward(adapter: Any, case: Any) -> tuple[Any, InPlace | None]:
    """(the output of a first forward call, the in-place fields or None). For an op with
    in-place outputs, every field's values from before any call wrote into them are kept
    (also those of fields the forward adds, such as the incoming gradient) and written back,
    so the next call sees the inputs as built."""
    inplace = InPlace.of(adapter)
    if inplace:
        inplace.keep(case)
    out = adapter.forward(case)
    if inplace:  # fields the forward added; those kept above keep their first values
        inplace.keep(case).restore(case)
    return out, inplace


def prepared(adapter: Any, case: Any) -> InPlace | None:
    """:func:`first_forward`'s fields for an op with in-place outputs; None (and no call)
    otherwise."""
    if InPlace.of(adapter) is None:
        return None
    return first_forward(adapter, case)[1]


def reference(adapter: Any, case: Any, inplace: InPlace | None) -> dict[str, torch.Tensor]:
    """``adapter.reference(case)`` on the inputs the op saw (the kept ones when in place), at
    full fp32 precision whatever numeric flags the project set."""
    from kernel_ratchet.harness.process_guard import precise_numerics

    with precise_numerics():
        if inplace is None:
            return adapter.reference(case)
        with inplace.as_kept(case):
            return adapter.reference(case)
