"""Red-team candidates that keep a result and skip the work: a cache by the inputs' identity,
address or storage, a buffer rewritten in part, inputs swapped or made unwritable; the
outputs must follow the inputs. Imported through :mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


class IdCache(TinyGemm):
    """Output cache keyed on ``id()`` of the inputs (returns the cached tensor)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, int], torch.Tensor] = {}

    def forward(self, case: Case) -> torch.Tensor:
        key = (id(case.a), id(case.b))
        if key not in self.cache:
            self.cache[key] = matmul_nt(case.a, case.b)
        return self.cache[key]


class DataPtrCache(TinyGemm):
    """Output cache keyed on ``data_ptr`` (returns a fresh copy, so poisoning alone misses it)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, int], torch.Tensor] = {}

    def forward(self, case: Case) -> torch.Tensor:
        key = (case.a.data_ptr(), case.b.data_ptr())
        if key not in self.cache:
            self.cache[key] = matmul_nt(case.a, case.b)
        return self.cache[key].clone()


class CachedTensor(TinyGemm):
    """Computes once per shape, then returns the same tensor object every call."""

    def __init__(self) -> None:
        self.out: torch.Tensor | None = None

    def forward(self, case: Case) -> torch.Tensor:
        if self.out is None or self.out.shape != (case.a.shape[0], case.b.shape[0]):
            self.out = matmul_nt(case.a, case.b)
        return self.out


class SkipRepeated(TinyGemm):
    """Skips the work when called again with the same input objects (returns a copy)."""

    def __init__(self) -> None:
        self.last: tuple[int, int, torch.Tensor] | None = None

    def forward(self, case: Case) -> torch.Tensor:
        if self.last is not None and self.last[:2] == (id(case.a), id(case.b)):
            return self.last[2].clone()
        out = matmul_nt(case.a, case.b)
        self.last = (id(case.a), id(case.b), out.clone())
        return out


class PartialWrite(TinyGemm):
    """Keeps an output buffer and, after the first call, rewrites only its first half rows."""

    def __init__(self) -> None:
        self.buf: torch.Tensor | None = None

    def forward(self, case: Case) -> torch.Tensor:
        M, N = case.a.shape[0], case.b.shape[0]
        if self.buf is None or self.buf.shape != (M, N):
            self.buf = matmul_nt(case.a, case.b)
        else:
            half = max(M // 2, 1)
            self.buf[:half] = matmul_nt(case.a[:half], case.b)
        return self.buf


class SwapInputs(TinyGemm):
    """Replaces an input in the case by an equal clone: new values written into the tensors
    make_case built no longer reach it, so one result cached per case stays right."""

    def forward(self, case: Case) -> torch.Tensor:
        if getattr(case, "_mine", None) is not case.a:
            case.a = case.a.clone()
            case._mine = case.a  # type: ignore[attr-defined]
            case._res = matmul_nt(case.a, case.b)  # type: ignore[attr-defined]
        return case._res.clone()  # type: ignore[attr-defined]


class ShadowCopy(TinyGemm):
    """Gives its inputs a ``copy_`` of their own that does nothing: new values are never
    written, and one cached result stays right."""

    def forward(self, case: Case) -> torch.Tensor:
        a, b = case.a, case.b
        if "copy_" not in vars(a):
            a.copy_ = lambda src, *x, **k: a  # type: ignore[method-assign]
            b.copy_ = lambda src, *x, **k: b  # type: ignore[method-assign]
            vars(a)["_res"] = matmul_nt(a, b)
        return vars(a)["_res"].clone()


class HideFields(TinyGemm):
    """Empties ``Case.__dataclass_fields__`` (the dict stays the same object): a walk of the
    case by its fields finds no input to rebind, hash or compare, and one cached result per
    case stays right."""

    def forward(self, case: Case) -> torch.Tensor:
        Case.__dataclass_fields__.clear()  # type: ignore[attr-defined]
        res = vars(case).get("_res")
        if res is None:
            res = case._res = matmul_nt(case.a, case.b)  # type: ignore[attr-defined]
        return res.clone()
