"""The adapter of an op described in ``ratchet.yaml`` (generated at run time).

The profile turns an op entry with a ``function`` into the adapter spec ``described:{json}``
(:mod:`.described_spec`, which reads and writes the specs without torch);
:func:`~kernel_ratchet.harness.adapter.load_adapter` comes here for its adapter.

What the generated adapter does, for inputs ``x, w`` and outputs ``y``:

* ``make_case``: each input drawn from the seed on the device (floats ``randn``, integers in
  [0, 128) or their bound, as the marks of :mod:`.input_values` say), as attributes of the
  case (``case.x``); inputs named in ``gradients`` require grad.
* ``forward``: ``function(x, w, **kwargs)``; the incoming gradient of each output (``case.dy``)
  is drawn from the seed the first time the output's size is known.
* ``backward``: ``torch.autograd.grad`` of the outputs with respect to the ``gradients``
  inputs from the last forward's graph (kept, so the backward is timed alone).
* ``outputs`` / ``reference``: ``{"y": ..., "dx": ..., "dw": ...}``; the reference runs
  ``reference(x, w, **reference_kwargs)`` on the inputs in float32 (``reference_dtype``).
* thresholds per output from ``tolerance`` (by name, then by the output's dtype, then the
  SPEC value of that dtype); work from ``flops`` / ``bytes`` over the shape's symbols.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Mapping
from typing import Any

import torch

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.adapter import DESCRIBED_PREFIX, Adapter, Shape
from kernel_ratchet.harness.callables import import_callable
from kernel_ratchet.harness.described_spec import symbols_of
from kernel_ratchet.harness.description import IO, Description, reference_call_problem
from kernel_ratchet.harness.index_outputs import gathered
from kernel_ratchet.harness.input_values import Marks, draw
from kernel_ratchet.harness.shape_values import resolved
from kernel_ratchet.harness.symbolic import (
    SHAPE_DTYPE,
    TensorSpec,
    dtype_name,
    evaluate,
    torch_dtype,
)

INT_HIGH = 128


def adapter_from_spec(spec: str) -> DescribedAdapter:
    """The adapter of a ``described:`` spec; ProfileError when it does not validate."""
    try:
        raw = json.loads(spec[len(DESCRIBED_PREFIX) :])
        schema = raw.pop("schema")
        return DescribedAdapter(Description.from_dict(raw), schema)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProfileError(f"op description in ratchet.yaml does not validate: {exc}") from exc


#: The 8-bit float dtypes, by name.
FP8_NAMES = frozenset({"float8_e4m3fn", "float8_e5m2"})
#: The bar of an fp8 output against a reference that returns the same fp8 dtype: the bundled
#: quantizations' own (a 3% error in the scale measures about 26 dB there).
SAME_FP8_DB = 40.0


class Case:
    """Inputs of one call as attributes (``case.x``); ``case.d<out>`` once drawn."""


def _as_tuple(out: Any, names: tuple[str, ...] | None = None) -> tuple[torch.Tensor, ...]:
    """The returned tensors in order; ``None`` entries are skipped, as for every op (a loss
    that returns ``(loss, None, None)`` when its extras are not asked for has one output). A
    returned dict gives its declared names' values."""
    if isinstance(out, Mapping) and names is not None:
        missing = [n for n in names if n not in out]
        if missing:
            raise TypeError(
                f"the function returned a dict with keys {sorted(map(str, out))}, without the "
                f"declared output(s) {missing}: declare outputs by the dict's keys"
            )
        out = tuple(out[n] for n in names)
    outs = tuple(o for o in out if o is not None) if isinstance(out, (tuple, list)) else (out,)
    odd = [
        f"{type(o).__name__} at position {i}"
        for i, o in enumerate(outs)
        if not isinstance(o, torch.Tensor)
    ]
    if odd:
        raise TypeError(
            f"the function returned {', '.join(odd)} where ratchet.yaml's outputs are tensors: "
            "return tensors only (a count as a 0-d tensor), or leave it out of the return"
        )
    if names is not None and len(outs) != len(names):
        raise TypeError(
            f"the function returned {len(outs)} tensor(s) but ratchet.yaml declares the outputs "
            f"{list(names)}: declare one name per returned tensor, in order (None entries of a "
            "returned tuple are skipped)"
        )
    return outs


class DescribedAdapter(Adapter):
    """The adapter generated from a :class:`Description` (see the module docstring)."""

    forward_state = True  # the backward runs on the last forward's autograd graph

    def __init__(self, desc: Description, schema: str) -> None:
        self.desc, self.schema = desc, schema  # type: ignore[misc]
        self.has_backward = bool(desc.gradients)  # type: ignore[misc]
        self.inplace_outputs = desc.inplace_outputs  # type: ignore[misc]
        # the reference first: a kernel module's import-time work cannot precede it
        self.ref = import_callable(desc.reference)
        self.fn = import_callable(desc.function)
        self._seeds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._consts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per case
        self._graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._dtypes: dict[str, str] = {}
        self._expected: dict[str, str] = {}  # the dtypes the last case's outputs should have
        self._ref_dtypes: dict[str, str] = {}  # the dtypes the last reference returned

    def returned_names(self, phase: str) -> tuple[str, ...]:
        return tuple(self.desc.grad_names) if phase == "bwd" else tuple(self.desc.outputs)

    # -- inputs --

    def make_case(self, shape: Shape, seed: int, device: str) -> Case:
        sym = symbols_of(shape)
        g = torch.Generator(device=device).manual_seed(seed)
        case = Case()
        for name, spec in self.desc.inputs.items():
            dtype, high = spec.resolved_dtype(shape.dtype), spec.value_high(sym) or INT_HIGH
            t = draw(spec.size(sym), torch_dtype(dtype), spec.marks, g, device, high)
            setattr(case, name, t.requires_grad_(name in self.desc.gradients))
        self._seeds[case] = seed
        self._consts[case] = self._constants(sym)
        self._expected = self._expected_dtypes(shape.dtype)
        return case

    def _constants(self, sym: Mapping[str, int]) -> tuple[tuple, dict, dict]:
        """args, kwargs and reference_kwargs for a shape binding ``sym`` (``"${expr}"``
        constants evaluated, :mod:`.shape_values`)."""
        d = self.desc
        return (
            tuple(resolved(v, sym) for v in d.args),
            {k: resolved(v, sym) for k, v in d.kwargs.items()},
            {k: resolved(v, sym) for k, v in d.reference_kwargs.items()},
        )

    def _expected_dtypes(self, shape_dtype: str | None) -> dict[str, str]:
        """The dtype each output and gradient should come in: a declared output's own, an
        input's for its gradient, else the shape's (none where nothing says)."""
        d = self.desc
        if shape_dtype is not None:
            shape_dtype = dtype_name(shape_dtype)
        out = {n: _resolved(d.output_specs[n], shape_dtype) for n in d.output_specs}
        out.update({n: shape_dtype for n in d.outputs if n not in d.output_specs})
        out.update({f"d{n}": _resolved(d.inputs[n], shape_dtype) for n in d.gradients})
        return {n: t for n, t in out.items() if t is not None}

    def _grad_outs(self, case: Case, outs: tuple[torch.Tensor, ...]) -> list[torch.Tensor | None]:
        """The incoming gradient of each output, drawn once per case from its seed; None for an
        output that has none (integers: indices, predicted tokens, counts)."""
        names = list(self.desc.grad_out_names)
        if not hasattr(case, names[0]):
            g = torch.Generator(device=outs[0].device).manual_seed(self._seeds[case] + 1)
            for name, out in zip(names, outs, strict=True):
                if not out.is_floating_point():
                    setattr(case, name, None)
                    continue
                spec = self.desc.output_specs.get(name[1:])
                marks = spec.marks if spec else Marks()
                grad = draw(tuple(out.shape), out.dtype, marks, g, str(out.device), INT_HIGH)
                setattr(case, name, grad)
        return [getattr(case, n) for n in names]

    def _args(self, case: Case) -> list[torch.Tensor]:
        return [getattr(case, n) for n in self.desc.inputs]

    # -- the op --

    def forward(self, case: Case) -> Any:
        args, kwargs, _ = self._consts[case]
        out = self.fn(*self._args(case), *args, **kwargs)
        if out is None:
            out = self._written(case)
        outs = _as_tuple(out, self.desc.outputs)
        self._dtypes.update({n: _dtype(t) for n, t in zip(self.desc.outputs, outs, strict=True)})
        if self.has_backward:
            self._grad_outs(case, outs)
            self._graphs[case] = outs
        return out

    def _written(self, case: Case) -> Any:
        """The outputs of a function that returned None: the inputs it wrote in place, where
        every declared output is one (``inplace_outputs``)."""
        d = self.desc
        if not set(d.outputs) <= set(d.inplace_outputs) & set(d.inputs):
            raise TypeError(
                f"the function returned None, and ratchet.yaml declares the outputs "
                f"{list(d.outputs)}: return them, or, for an op that writes its results into "
                "its inputs, name those inputs in both outputs and inplace_outputs"
            )
        outs = tuple(getattr(case, n) for n in d.outputs)
        return outs if len(outs) > 1 else outs[0]

    def backward(self, case: Case) -> tuple[torch.Tensor, ...]:
        graph = self._graphs[case]
        outs, douts = _differentiable(graph, self._grad_outs(case, graph))
        if not outs:
            raise ProfileError(
                f"gradients {list(self.desc.gradients)} are declared, but no output of "
                f"{self.desc.function} carries an autograd graph: the function has no backward "
                "(a kernel launched directly is not differentiable). Wrap it in a "
                "torch.autograd.Function with a backward, or remove `gradients` from the op"
            )
        leaves = [getattr(case, n) for n in self.desc.gradients]
        grads = torch.autograd.grad(outs, leaves, douts, retain_graph=True, allow_unused=True)
        grads = tuple(
            torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves, strict=True)
        )
        self._dtypes.update(
            {f"d{n}": _dtype(t) for n, t in zip(self.desc.gradients, grads, strict=True)}
        )
        return grads

    def outputs(self, case: Case) -> dict[str, torch.Tensor]:
        outs = _as_tuple(self.forward(case), self.desc.outputs)
        got = dict(zip(self.desc.outputs, outs, strict=True))
        if self.has_backward:
            got.update(zip(self.desc.grad_names, self.backward(case), strict=True))
        return self._selected(case, got, reference=False)

    def reference(self, case: Case) -> dict[str, torch.Tensor]:
        up = self.desc.reference_dtype
        leaves = {}
        for name in self.desc.inputs:
            t = getattr(case, name).detach()
            if up != "input" and t.is_floating_point():
                t = t.to(torch_dtype(up))
            leaves[name] = t.clone().requires_grad_(name in self.desc.gradients)
        try:
            res = self.ref(*leaves.values(), **self._consts[case][2])
        except TypeError as exc:  # say so where the call itself does not fit the reference
            if not (problem := reference_call_problem(self.ref, self.desc)):
                raise
            raise TypeError(problem) from exc
        outs = _as_tuple(res, self.desc.outputs)
        got = dict(zip(self.desc.outputs, (o.detach() for o in outs), strict=True))
        self._ref_dtypes = {n: _dtype(t) for n, t in got.items()}
        if self.has_backward:
            diff, douts = _differentiable(outs, self._grad_outs(case, outs))
            wrt = [leaves[n] for n in self.desc.gradients]
            grads = torch.autograd.grad(diff, wrt, douts)
            got.update(zip(self.desc.grad_names, grads, strict=True))
        return self._selected(case, got, reference=True)

    def checked_part(self, name: str, value: Any, case: Case) -> Any:
        """A ``gathers=`` output of a timed call as :meth:`outputs` checks it."""
        return self._selected(case, {name: value}, reference=False)[name]

    def _selected(self, case: Case, got: dict[str, Any], reference: bool) -> dict[str, Any]:
        """Each ``gathers=`` output as the values its indices select from the case's input
        (:mod:`.index_outputs`): ties compare equal whichever index a kernel picks."""
        for name, src in self.desc.gathered.items():
            if isinstance(got.get(name), torch.Tensor):
                got[name] = gathered(name, got[name], src, getattr(case, src), reference)
        return got

    def training_roles(self, case: Case) -> dict[str, str]:
        """The described ``roles``; without them every input is an activation, a new tensor
        every training step, so no gain may rest on any input's identity (declare
        ``roles: {w: weight}`` for a weight that keeps its identity, and a cache keyed on it
        is judged as a weight cache)."""
        return dict(self.desc.roles) or {name: "activation" for name in self.desc.inputs}

    # -- thresholds and work --

    def threshold(self, name: str) -> float:
        """The SNR bar of ``name``: of the dtype it came in, or of the dtype it should have
        come in where that is stricter (an fp32 op whose kernel returns bf16 is held to
        fp32's bar, not to bf16's). A ``gathers=`` output must select equal values (an
        infinite bar, which only an exact match meets) unless its name has a tolerance. An
        fp8 output whose reference returns the same fp8 dtype (it quantizes too) is held to
        :data:`SAME_FP8_DB`, not to the bar of fp8 against a full-precision result: the two
        sides differ by a rounding step in a few entries, and a wrong scale falls under it."""
        if name in self.desc.gathered:
            return self.desc.tolerance.get(name, math.inf)
        came = self._dtypes.get(name)
        got = self.desc.threshold(name, came)
        declared = name in self.desc.tolerance or (came in self.desc.tolerance)
        if came in FP8_NAMES and self._ref_dtypes.get(name) == came and not declared:
            got = max(got, SAME_FP8_DB)
        expected = self._expected.get(name)
        if expected is None or name in self.desc.tolerance:
            return got
        return max(got, self.desc.threshold(name, expected))

    def dtype_notes(self) -> list[str]:
        """A note per output the last call returned in a lower-precision dtype than the one
        nothing declared it to have: it is held to the stricter bar of the two, right for an
        fp32 op handing back bf16, wrong for a quantization whose contract is fp8."""
        d = self.desc
        notes = []
        for name, got in self._dtypes.items():
            want = self._expected.get(name)
            if got is None or want is None or got == want or name in d.output_specs:
                continue
            if name in d.tolerance or self.desc.threshold(name, got) >= self.threshold(name):
                continue
            notes.append(
                f"{name} comes back {got} and is held to {want}'s {self.threshold(name):g} dB, "
                f"since nothing declares its dtype; if {got} is its contract, declare it: "
                f'outputs: {{{name}: "[...] {got}"}}'
            )
        return notes

    def flops(self, shape: Shape) -> tuple[float, float]:
        return self._work(self.desc.flops, shape)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        return self._work(self.desc.bytes, shape)

    def _work(self, pair: tuple[str | None, str | None], shape: Shape) -> tuple[float, float]:
        fwd_expr, bwd_expr = pair
        if fwd_expr == IO and bwd_expr is None and self.has_backward:
            bwd_expr = IO  # "io" alone counts both passes' inputs and outputs
        if fwd_expr == IO or bwd_expr == IO:
            io = self._io_bytes(shape)
        sym = symbols_of(shape)

        def value(expr: str | None, i: int) -> float:
            return io[i] if expr == IO else evaluate(expr, sym) if expr else 0.0

        fwd = value(fwd_expr, 0)
        bwd = value(bwd_expr, 1) if bwd_expr else 2.0 * fwd if self.has_backward else 0.0
        return fwd, bwd

    def _io_bytes(self, shape: Shape) -> tuple[float, float]:
        """Forward: every input and output once. Backward: the incoming gradients, the inputs
        and the gradients written. Output sizes from ``outputs`` when declared with sizes,
        else from the reference run on meta tensors (no data, no device)."""
        sym = symbols_of(shape)
        ins = {n: _meta(s, sym, shape.dtype) for n, s in self.desc.inputs.items()}
        if self.desc.output_specs:
            outs = [_meta(s, sym, shape.dtype) for s in self.desc.output_specs.values()]
        else:
            try:
                ref = self.ref(*ins.values(), **self._constants(sym)[2])
                outs = list(_as_tuple(ref, self.desc.outputs))
            except Exception as exc:  # the reference may not support meta tensors
                raise ProfileError(
                    f"bytes: io needs the outputs' sizes and the reference cannot run on meta "
                    f"tensors ({type(exc).__name__}: {exc}); declare them: outputs: "
                    "{y: '[M, N] bfloat16'}"
                ) from exc
        nbytes = lambda ts: float(sum(t.numel() * t.element_size() for t in ts))  # noqa: E731
        fwd = nbytes(ins.values()) + nbytes(outs)
        grads = [ins[n] for n in self.desc.gradients]
        bwd = nbytes(outs) + nbytes(ins.values()) + nbytes(grads) if grads else 0.0
        return fwd, bwd


def _differentiable(
    outs: tuple[torch.Tensor, ...], douts: list[torch.Tensor | None]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The outputs a backward flows through, with their incoming gradients in their dtype:
    those with a gradient drawn and a graph (an integer output, or one the op detached for
    logging, has neither)."""
    pairs = [(o, d) for o, d in zip(outs, douts, strict=True) if d is not None and o.requires_grad]
    return [o for o, _ in pairs], [d if d.dtype == o.dtype else d.to(o.dtype) for o, d in pairs]


def _resolved(spec: TensorSpec, shape_dtype: str | None) -> str | None:
    return spec.dtype if spec.dtype != SHAPE_DTYPE else shape_dtype


def _dtype(t: Any) -> str | None:
    return str(t.dtype).removeprefix("torch.") if isinstance(t, torch.Tensor) else None


def _meta(spec: TensorSpec, sym: Mapping[str, int], shape_dtype: str | None) -> torch.Tensor:
    dtype = torch_dtype(spec.resolved_dtype(shape_dtype))
    return torch.empty(spec.size(sym), dtype=dtype, device="meta")


__all__ = ["SHAPE_DTYPE", "DescribedAdapter", "adapter_from_spec"]
