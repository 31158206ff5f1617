"""Red-team candidates that return before the work is done and finish it after the clock
stopped: a lazy tensor, a ``detach`` of its own, a signal handler, properties on the case
class, an audit hook. Imported through :mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import sys
from typing import Any

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


class _Lazy(torch.Tensor):
    """A tensor subclass standing for a result computed later."""


class LazySubclass(TinyGemm):
    """Returns a tensor subclass (a lazy result would defer the work past the timer)."""

    def forward(self, case: Case) -> torch.Tensor:
        return matmul_nt(case.a, case.b).as_subclass(_Lazy)


class LazyDetach(TinyGemm):
    """Returns an empty tensor whose own ``detach`` computes the result: the harness's
    readers call ``detach()`` after the clock stopped."""

    def forward(self, case: Case) -> torch.Tensor:
        a, b, memo = case.a, case.b, []
        out = torch.empty(a.shape[0], b.shape[0])

        def detach() -> torch.Tensor:
            if not memo:
                memo.append(matmul_nt(a, b))
            return memo[0]

        out.detach = detach  # type: ignore[method-assign]
        return out


class SignalDefer(TinyGemm):
    """Returns an empty buffer and arms a one-shot SIGALRM whose handler fills it: the work
    runs after the clock stopped, inside the harness's checks."""

    def __init__(self) -> None:
        import signal

        self.pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        signal.signal(signal.SIGALRM, self._fill)

    def _fill(self, *_: Any) -> None:
        while self.pending:
            buf, a, b = self.pending.pop()
            buf.copy_(matmul_nt(a, b))

    def forward(self, case: Case) -> torch.Tensor:
        import signal

        buf = torch.empty(case.a.shape[0], case.b.shape[0])
        self.pending.append((buf, case.a, case.b))
        signal.setitimer(signal.ITIMER_REAL, 0.0005)
        return buf


_DEFERRED: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []


def _finish_deferred(*_: Any) -> None:
    while _DEFERRED:
        buf, a, b = _DEFERRED.pop()
        buf.copy_(matmul_nt(a, b))


def _defer(case: Case) -> torch.Tensor:
    """An empty output, computed later by :func:`_finish_deferred`."""
    a, b = vars(case)["a"], vars(case)["b"]
    buf = torch.empty(a.shape[0], b.shape[0])
    _DEFERRED.append((buf, a, b))
    return buf


def _finishing_field(name: str) -> property:
    def get(self: Any) -> Any:
        _finish_deferred()
        return vars(self)[name]

    def put(self: Any, value: Any) -> None:
        vars(self)[name] = value

    return property(get, put)


class DeferViaCase(TinyGemm):
    """Puts properties on the project's ``Case`` class that finish deferred work whenever a
    field is read: the checks read the inputs after the clock stopped."""

    def forward(self, case: Case) -> torch.Tensor:
        if not isinstance(vars(Case).get("a"), property):
            Case.a, Case.b = _finishing_field("a"), _finishing_field("b")  # type: ignore[misc]
        return _defer(case)


def _finish_on_id(event: str, args: tuple[Any, ...]) -> None:
    if event == "builtins.id" and _DEFERRED and not getattr(_finish_on_id, "busy", False):
        _finish_on_id.busy = True  # type: ignore[attr-defined]
        try:
            _finish_deferred()
        finally:
            _finish_on_id.busy = False  # type: ignore[attr-defined]


class AuditDefer(TinyGemm):
    """Adds an audit hook of its own that finishes deferred work on the first ``id()`` call:
    the Sentinel's verification after the sample calls it."""

    def forward(self, case: Case) -> torch.Tensor:
        if not getattr(AuditDefer, "hooked", False):
            AuditDefer.hooked = True  # type: ignore[attr-defined]
            sys.addaudithook(_finish_on_id)
        return _defer(case)
