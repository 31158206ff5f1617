"""Which optimizer a ``ratchet run`` or ``ratchet resume`` drives with, from its options."""

from __future__ import annotations

from kernel_ratchet.errors import RatchetError


def choose_optimizer(
    name: str,
    agent_cmd: str | None,
    agent_timeout: float,
    knobs: str | None = None,
    queue: str | None = None,
):
    """The optimizer named by ``--optimizer`` with its options; raises RatchetError for
    options that do not go with it."""
    from kernel_ratchet.optimizers.base import load_optimizer

    if (name == "queue") != bool(queue):
        raise RatchetError(
            "--optimizer queue takes its candidates from --queue DIR (NAME.diff and NAME.json "
            "per candidate); --queue goes with --optimizer queue only"
        )
    if queue:
        return load_optimizer("queue", path=queue)
    if knobs and name != "search":
        raise RatchetError(
            f"--knobs restricts the search optimizer; --optimizer {name} has none to restrict "
            "(drop --knobs or use --optimizer search)"
        )
    if knobs:
        return load_optimizer("search", knobs=knobs)
    if name == "agent":
        if not agent_cmd:
            raise RatchetError(
                "--optimizer agent needs --agent-cmd, a command template with "
                "{prompt_file} (and optionally {workdir}, {hypothesis_file}), "
                "e.g. --agent-cmd 'claude -p \"$(cat {prompt_file})\"'"
            )
        return load_optimizer("agent", command=agent_cmd, timeout_s=agent_timeout)
    return load_optimizer(name)
