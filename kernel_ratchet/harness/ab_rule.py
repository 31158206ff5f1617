"""The contract between a paired A/B's measuring loop and the rule that decides it.

The harness measures rounds (:func:`kernel_ratchet.harness.ab.run_paired`); a
:class:`SequentialRule`, given by the caller, says when to look at them, when a hopeless
candidate may stop early, and what to decide. Scoring implements it
(:class:`kernel_ratchet.scoring.paired_looks.PairedLooks`); the harness never imports scoring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from kernel_ratchet.harness.paired_samples import PairedSamples


@runtime_checkable
class LookDecision(Protocol):
    """What a :class:`SequentialRule` decided at one look, as far as the measuring loop reads
    it: the shapes worth more rounds, a one-line summary, and a JSON-ready record."""

    @property
    def undecided(self) -> tuple[str, ...]:
        """Labels whose further rounds could change the decision; empty when it is settled."""
        ...

    @property
    def verdict_aggregate(self) -> object: ...

    @property
    def aggregate_ratio(self) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...


D_co = TypeVar("D_co", bound=LookDecision, covariant=True)


@runtime_checkable
class SequentialRule(Protocol[D_co]):
    """When a paired run looks at its rounds, when it may stop early, and what it decides.

    Samples are per shape (:class:`~kernel_ratchet.harness.paired_samples.PairedSamples`);
    ``campaign_type`` says which phases make the primary metric.
    """

    def looks(self, k_start: int, k_max: int) -> tuple[int, ...]:
        """Round counts at which to decide, ending at ``k_max``; ValueError for a bad budget."""
        ...

    def futility_look(self, k_start: int) -> int | None:
        """Rounds after which a hopeless candidate may stop, or None for no such look."""
        ...

    def futile(self, samples: Mapping[str, PairedSamples], campaign_type: str) -> str | None:
        """Why the candidate cannot become a gain (a sentence), or None."""
        ...

    def precision_drop(
        self,
        incumbent: Mapping[str, Mapping[str, float]],
        candidate: Mapping[str, Mapping[str, float]],
    ) -> str | None:
        """Why the candidate's precision fell below the incumbent's (a sentence), or None.
        Both map a shape label to ``{output: SNR dB}`` of the correctness check, which ran on
        the same inputs for both sides."""
        ...

    def decide(
        self,
        samples: Mapping[str, PairedSamples],
        campaign_type: str,
        *,
        exhausted: bool,
        looks: int,
    ) -> D_co:
        """The decision on the rounds so far; ``exhausted``: the budget is spent; ``looks``:
        how many looks were planned."""
        ...
