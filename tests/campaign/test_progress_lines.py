"""What the CLI's progress callback prints: the message as given, on one line."""

from __future__ import annotations

from kernel_ratchet.cli.common import progress


def test_a_message_is_printed_as_plain_text_on_one_line(capsys) -> None:
    command = "cp .ratchet/campaigns/a_very_long_campaign_name/rounds/round-2/kernel_snapshot/" + (
        "pkg/kernel.py pkg/kernel.py"
    )
    with progress() as say:
        say("[exhaustive 1/5] cfg: ok")  # bracketed text is no markup
        say(f"to work on it again, from the project root: {command}")
    lines = capsys.readouterr().err.splitlines()
    assert "[exhaustive 1/5] cfg: ok" in lines
    assert any(line.endswith(command) for line in lines)  # not wrapped at 80 columns
