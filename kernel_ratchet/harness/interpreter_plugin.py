"""A pytest plugin (entry point ``pytest11``) for the tests a campaign runs.

Where a command that ``ratchet`` starts (:data:`STEP_ENV` set) runs Triton kernels in the
interpreter (``TRITON_INTERPRET=1``: a CPU rehearsal, a focused test with no GPU visible), the
interpreter gets the fixes the harness and the A/B's workers have
(:func:`kernel_ratchet.harness.interpreter.install`): bfloat16 arithmetic and ``tl.dot`` on
values, fp8 casts rounded to nearest even, libdevice bodies, fp32 float scalars, and scalar
indices that numpy 2.4 and later accept. The focused test and the harness then compute alike.
A pytest the user runs by hand is left as it is, and so is one that loads no plugins
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``).
"""

from __future__ import annotations

import os

#: Set in every command a campaign starts (:func:`kernel_ratchet.campaign.steps.start_step`).
STEP_ENV = "RATCHET_STEP"


def _install() -> None:
    if os.environ.get(STEP_ENV) != "1":
        return
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return
    from kernel_ratchet.harness import interpreter

    interpreter.install()


def pytest_configure(config) -> None:
    """After the initial conftests (one that sets ``TRITON_INTERPRET`` has run)."""
    _install()


def pytest_collection_finish(session) -> None:
    """After the test modules' imports (one that sets ``TRITON_INTERPRET`` has run)."""
    _install()
