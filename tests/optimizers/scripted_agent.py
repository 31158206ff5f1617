"""A scripted coding agent for tests: each call applies the next prepared patch.

Usage: python scripted_agent.py PATCHES_JSON STATE_FILE WORKDIR HYPOTHESIS_FILE [PROMPT_FILE]

PATCHES_JSON is a list of {"hypothesis": {...}, "edits": [{"path", "old", "new"} or
{"path", "append"}]}. The hypothesis is written first, then the edits; when the patches are
used up the agent writes {"stop": true}. A JSON line with its (fake) cost is printed. Like a
sensible agent, it repeats its previous patch when the prompt says the last round was
"unconfirmed" (a gain the engine could not confirm is not an ineffective direction).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    patches_file, state_file, workdir, hyp_file = argv[:4]
    patches = json.loads(Path(patches_file).read_text())
    state = Path(state_file)
    i = int(state.read_text()) if state.exists() else 0
    prompt = Path(argv[4]).read_text() if len(argv) > 4 else ""
    recent = prompt.split("## Recent rounds", 1)[-1].split("##", 1)[0].strip().splitlines()
    if i > 0 and recent and "(unconfirmed)" in recent[-1]:
        i -= 1  # measure the same change again
    state.write_text(str(i + 1))
    if i >= len(patches):
        Path(hyp_file).write_text(json.dumps({"stop": True, "reason": "no patches left"}))
        return 0
    patch = patches[i]
    Path(hyp_file).write_text(json.dumps(patch["hypothesis"]))
    for e in patch["edits"]:
        path = Path(workdir) / e["path"]
        text = path.read_text()
        if "append" in e:
            text += e["append"]
        else:
            assert e["old"] in text, (e["old"], path)
            text = text.replace(e["old"], e["new"], 1)
        path.write_text(text)
    print(json.dumps({"type": "result", "total_cost_usd": 0.01}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
