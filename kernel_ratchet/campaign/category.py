"""Why a round ended as it did, as data: :class:`Category`, its root cause, and the one rule
of which rollbacks prove a direction ineffective (SPEC section 7's verified-ineffective
directions)."""

from __future__ import annotations

from enum import Enum

from kernel_ratchet.scoring.decision import Status


class Category(str, Enum):
    """Why a round ended as it did: ``ok`` (accepted), ``baseline``, or a rollback's cause."""

    BASELINE = "baseline"
    OK = "ok"
    SCOPE = "scope"
    BUILD = "build"
    TEST = "test"
    HARNESS = "harness"
    SCHEMA = "schema"
    CORRECTNESS = "correctness"
    REGRESSION = "regression"
    NOISE = "noise"
    NO_GAIN = "no-gain"
    INTERRUPTED = "interrupted"
    UNCONFIRMED = "unconfirmed"
    OVERFIT = "overfit"
    BACKEND = "backend"
    INCUMBENT = "incumbent"
    # a parallel round's candidate whose gain was confirmed, but another's was larger
    SUPERSEDED = "superseded"
    # a candidate's failure inside a paired A/B worker (kernel_ratchet.harness.worker)
    HANG = "hang"
    CRASH = "crash"
    ILLEGAL_MEMORY = "illegal_memory"
    OOM = "oom"
    COMPILE = "compile"
    NAN = "nan"
    CHEAT = "cheat"
    WRONG = "wrong"
    BAD_TIMING = "bad_timing"
    # the candidate's SNR fell below the incumbent's on the same inputs (kernel_ratchet.harness.ab)
    PRECISION = "precision"
    # a rehearsal (Triton interpreter): its timings rank nothing, so no timing verdict stands
    REHEARSAL = "rehearsal"

    def __str__(self) -> str:
        return self.value

    @property
    def root_cause(self) -> str:
        """The Rollback Analysis' root cause of this category (its name when it has none)."""
        return ROOT_CAUSES.get(self, self.value)

    @property
    def verified(self) -> bool:
        """Whether a rollback of this category proves its direction ineffective."""
        return self in VERIFIED_CATEGORIES


ROOT_CAUSES: dict[Category, str] = {
    Category.SCOPE: "the change touched files outside kernel_source",
    Category.BUILD: "the rebuild command failed",
    Category.TEST: "the focused test failed (correctness gate)",
    Category.HARNESS: "the harness crashed or produced no CSV",
    Category.SCHEMA: "the benchmark CSV does not match the frozen schema",
    Category.CORRECTNESS: "a shape failed the harness correctness check (Check=FAIL)",
    Category.REGRESSION: "at least one shape regressed by 5% or more",
    Category.NOISE: "the gain is inside the measured noise band",
    Category.NO_GAIN: "the aggregate did not improve",
    Category.INTERRUPTED: "the round was interrupted before its decision",
    Category.UNCONFIRMED: "a gain above 1.5x did not hold when re-measured in fresh processes",
    Category.BACKEND: "the candidate hands the work to the vendor library or the reference",
    Category.INCUMBENT: "the incumbent could not be measured (infrastructure, not the candidate)",
    Category.SUPERSEDED: "its gain was confirmed, but a larger one of the same parallel round "
    "was accepted; it may be tried again on the new incumbent",
    Category.HANG: "the candidate hung (worker time limit)",
    Category.CRASH: "the candidate crashed its worker process",
    Category.ILLEGAL_MEMORY: "the candidate made an illegal memory access",
    Category.OOM: "the candidate ran out of device memory",
    Category.COMPILE: "the candidate failed to compile",
    Category.NAN: "the candidate produced NaN",
    Category.CHEAT: "the anti-cheat checks rejected the candidate",
    Category.WRONG: "the candidate's output is wrong",
    Category.BAD_TIMING: "the candidate's timings could not be used (no finite time, or taken in "
    "another timing mode than the incumbent's)",
    Category.PRECISION: "the candidate's output is less precise than the incumbent's on the same "
    "inputs: a precision change is not a speed gain, and takes the user's consent like a backend "
    "change",
    Category.REHEARSAL: (
        "a rehearsal: interpreter timings rank nothing, so the round is rolled back whatever "
        "they said (never committed); measure it on the GPU"
    ),
}

#: Rolled-back categories that prove a direction ineffective. An interrupted, scope, harness or
#: infrastructure rollback says nothing about the direction itself: it may be tried again.
VERIFIED_CATEGORIES = frozenset(
    {
        Category.NO_GAIN,
        Category.REGRESSION,
        Category.NOISE,
        Category.CORRECTNESS,
        Category.TEST,
        Category.BUILD,
    }
)


#: Failures of the candidate itself inside its paired A/B worker: the same change fails the same
#: way again, so a search does not propose it twice (they prove nothing about its speed, so they
#: are not verified-ineffective for an agent that fixes the change).
CANDIDATE_FAILURES = frozenset(
    {
        Category.HANG,
        Category.CRASH,
        Category.ILLEGAL_MEMORY,
        Category.OOM,
        Category.COMPILE,
        Category.NAN,
        Category.CHEAT,
        Category.WRONG,
    }
)


def check_outcome(status: Status, category: Category) -> None:
    """Raise ValueError when ``category`` cannot be the cause of a round ending ``status``."""
    expected = {Status.BASELINE: Category.BASELINE, Status.ACCEPTED: Category.OK}
    if status in expected and category is not expected[status]:
        raise ValueError(f"a {status.value} round has category {expected[status].value!r}")
    if status is Status.ROLLED_BACK and category in (Category.BASELINE, Category.OK):
        raise ValueError(f"a rolled-back round cannot have category {category.value!r}")


def is_verified_ineffective(status: Status, category: Category) -> bool:
    """The one definition of a verified-ineffective direction: a rollback whose category
    proves it (the REPORT's list, the MCP tool's, the optimizers' never-again set)."""
    return status is Status.ROLLED_BACK and category.verified
