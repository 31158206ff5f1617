"""The one error family of kernel-ratchet.

Only infrastructure faults raise. A failing candidate (build error, wrong result, crash in a
worker) is a recorded outcome of a round, never an exception that escapes the engine.
Every message says what happened and what to do next.
"""

from __future__ import annotations

import threading


class RatchetError(Exception):
    """Base of every error the tool raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code = 2


class ProfileError(RatchetError):
    """``ratchet.yaml`` is missing, malformed or incomplete (names file, key and fix)."""

    exit_code = 3


class PreflightError(ProfileError):
    """The op that ``ratchet.yaml`` describes does not pass the DEFINE_TARGET checklist (a file
    missing, an adapter that does not import, no GPU for a GPU op): no campaign is created.
    Exit 3, like every other problem of the description."""


class UsageError(RatchetError):
    """The command was asked for something that does not exist (an unknown example, a
    destination already taken): the caller's mistake, exit 2 like typer's usage errors."""

    exit_code = 2


class UnknownOpError(ProfileError):
    """``--op`` names no op of ``ratchet.yaml``. Exit 3, like every problem of the description:
    the ops are what ``ratchet.yaml`` declares, and the fix may as well be an entry added there
    as another name on the command line."""


class SchemaError(RatchetError):
    """A benchmark CSV does not match its frozen schema (drifted, missing or renamed column)."""

    exit_code = 4


class CampaignError(RatchetError):
    """The campaign cannot proceed in its current state (wrong phase, no baseline, ...)."""

    exit_code = 5


class LockError(CampaignError):
    """Another process is driving this campaign."""

    exit_code = 6


class LogTamperedError(CampaignError):
    """An append-only log was edited in its already-written part."""

    exit_code = 7


class GitError(RatchetError):
    """A git command failed or the repository is not in a state the campaign can use."""

    exit_code = 8


class BranchError(GitError):
    """The checked-out branch is not the campaign's: a round would commit on another line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a job scheduler's limit): stop now, as a second Ctrl+C
    does. The engine closes the round in flight as interrupted, naming the signal; the CLI
    exits 143. A KeyboardInterrupt, so every place that closes a round on Ctrl+C closes it on
    SIGTERM too, instead of the process dying with the round half done."""

    exit_code = 143


#: Set by the CLI's SIGTERM handler before it raises :class:`Terminated`. The raise can be lost
#: (a signal handler that raises while a finalizer runs is only reported as ignored), so loops
#: also check this between rounds and stop there.
TERMINATION_REQUESTED = threading.Event()

#: Set by the CLI's Ctrl+C (SIGINT) handler before it raises KeyboardInterrupt. That raise can
#: be lost too: Python only reports an exception raised while the at-fork hooks of a
#: ``subprocess.Popen`` run, and the step goes on. Waits on child processes and the end of a
#: round's measurement check it (:func:`raise_if_interrupted`), so a Ctrl+C never lets a round
#: run on to its decision.
INTERRUPT_REQUESTED = threading.Event()


def raise_if_interrupted() -> None:
    """Raise the interruption of a SIGTERM or Ctrl+C whose own raise was lost in flight."""
    if TERMINATION_REQUESTED.is_set():
        raise Terminated("SIGTERM")
    if INTERRUPT_REQUESTED.is_set():
        raise KeyboardInterrupt("Ctrl+C")
