"""The ``manual`` optimizer: a person proposes, through ``ratchet validate``.

``ratchet run --optimizer manual`` sets the campaign up (init, BASELINE) and stops with the
instructions below; it never waits for input and never ends the campaign. Each round is then
one edit of the kernel files followed by ``ratchet validate --hypothesis ...``.
"""

from __future__ import annotations

from kernel_ratchet.optimizers.base import Optimizer, OptimizerContext, Proposal

INSTRUCTIONS = """\
Manual mode: you propose, the tool decides. For each round:
  1. edit only the kernel files: {kernel}
  2. ratchet validate --hypothesis "what you changed and why it should help" [--bucket K1]
     -> ACCEPTED (committed) or ROLLED BACK (kernel files restored)
  3. ratchet status   (rounds, incumbent, stagnation, termination)
End with `ratchet report` (full validation + final report), then `ratchet accept`."""


class ManualOptimizer(Optimizer):
    """Proposes nothing: it records the instructions for the person driving the campaign."""

    name = "manual"
    interactive = True

    def __init__(self) -> None:
        self.instructions = ""

    def propose(self, context: OptimizerContext) -> Proposal | None:
        self.instructions = INSTRUCTIONS.format(kernel=", ".join(context.kernel_source))
        return None
