"""The audit hook refuses writes to what a protected function runs, and only to those.

An audit hook stays for the life of its process, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(body: str) -> str:
    script = textwrap.dedent(
        """
        from kernel_ratchet.harness.audit_guard import Guard, methods_of
        from kernel_ratchet.harness.cheat import CheatDetected

        def honest(x, y=1, *, z=2):
            return x + y + z

        def other(x, y=5, *, z=7):
            return 0

        guard = Guard()
        """
    ) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_writes_to_a_protected_functions_body_are_refused_and_remembered():
    out = _run(
        """
        guard.protect([honest])
        for name, value in [("__code__", other.__code__), ("__defaults__", (9,)),
                            ("__kwdefaults__", {"z": 0})]:
            try:
                setattr(honest, name, value)
            except CheatDetected as exc:
                print("refused", name, "honest." + name in str(exc))
        try:
            del honest.__defaults__
        except CheatDetected:
            print("refused del")
        print("runs", honest(1))
        print("seen", guard.refused())
        """
    )
    assert "refused __code__ True" in out
    assert "refused __defaults__ True" in out and "refused __kwdefaults__ True" in out
    assert "refused del" in out
    assert "runs 4" in out  # nothing was written: it still computes 1 + 1 + 2
    assert "__main__.honest.__code__" in out  # the refusals are kept, even once caught


def test_other_functions_stay_writable():
    """torch's compiler gives functions it wraps new code and defaults: not refused."""
    out = _run(
        """
        guard.protect([honest])
        other.__defaults__ = (6,)
        other.__code__ = honest.__code__
        print("other", other(1), guard.refused())
        """
    )
    assert "other 14 []" in out  # 1 + 6 + 7: honest's code, other's new defaults


def test_an_adapters_methods_are_protected_with_its_bases():
    out = _run(
        """
        class Base:
            def reference(self, case):
                return case

        class Adapter(Base):
            def forward(self, case):
                return case

            @staticmethod
            def threshold(name):
                return 40.0

        print("count", guard.protect(methods_of(Adapter())))
        for fn in (Base.reference, Adapter.forward, Adapter.threshold):
            try:
                fn.__code__ = other.__code__
            except CheatDetected:
                print("refused", fn.__name__)
        """
    )
    assert "refused reference" in out and "refused forward" in out
    assert "refused threshold" in out
