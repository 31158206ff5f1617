"""An accepted round's commit subject: the summary cut at a word, never mid-word."""

from __future__ import annotations

from kernel_ratchet.campaign.render import commit_message, cut_words


def test_a_long_summary_is_cut_at_a_word():
    text = "two-dimensional tiles over rows and columns, with a description that runs on and on"
    cut = cut_words(text, 72)
    assert len(cut) <= 72 and cut.endswith("...") and text.startswith(cut[:-3])
    assert cut[:-3].split()[-1] in text.split()  # the last word is whole
    assert cut_words("short summary", 72) == "short summary"
    msg = commit_message("op", "TRITON", 3, text, "h", 1.0, 2.0, "d")
    assert msg.splitlines()[0] == f"[optimize] op TRITON round-3: {cut}"
