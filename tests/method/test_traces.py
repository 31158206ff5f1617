"""The report on paired-run traces (timings.jsonl), from synthetic traces."""

from __future__ import annotations

import json
import math

from kernel_ratchet.method.traces import report

STAGES = {"inputs": 0.01, "measure": 0.12, "spot": 0.02, "after": 0.005}


def _trace(path, rounds: int, cand_ms: float, first: str, stages: bool = True) -> None:
    lines = []
    for r in range(rounds):
        sides = ["incumbent", "candidate"] if first == "incumbent" else ["candidate", "incumbent"]
        for side in sides:
            ms = 1.0 + 0.01 * (r % 3) if side == "incumbent" else cand_ms
            lines.append(
                {
                    "round": r,
                    "label": "m64",
                    "phase": "fwd",
                    "side": side,
                    "ok": True,
                    "median_ms": ms,
                    "clock_mhz": [1980.0 - 10 * r, 1970.0],
                    "dropped": 1,
                    "flags": ["throttled sample kept"] if r == 0 else [],
                    "warmup_ms_spent": 30.0,
                    "request_s": 0.15,
                    **({"stages_s": STAGES} if stages else {}),
                }
            )
    lines.append({"round": 0, "label": "m64", "phase": "fwd", "side": "incumbent", "ok": False})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_one_row_per_shape_and_phase_with_cost_drops_and_noise(tmp_path):
    _trace(tmp_path / "a.jsonl", 9, 1.0, "incumbent")
    _trace(tmp_path / "b.jsonl", 9, 0.5, "candidate")  # another A/B: its own centre
    text = report([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    lines = text.splitlines()
    assert len(lines) == 5 and lines[3] == ""
    # 2 files x 9 rounds x 2 sides = 36 requests of 0.15 s: 0.01 + 0.12 + 0.005 in the worker
    assert lines[4] == (
        "36 requests, 5.4 s in all; warm-up 1.1 s; in the worker (36 requests with stage "
        "times): inputs 0.4 s, measurement 4.3 s (spot checks 0.7 s), checks after 0.2 s; "
        "outside the worker 0.5 s"
    )
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:8] == [
        "m64",
        "fwd",
        "36",
        "0.150",
        "0.010 / 0.120 / 0.020 / 0.005",
        "30",
        "36",
        "4x throttled sample kept",
    ]
    spread = float(cells[8].rstrip("%")) / 100
    assert 0.0 < spread < 0.02  # each file centred on its own median: the 2x gap is no noise
    assert cells[9].endswith("%") and not math.isnan(float(cells[9].rstrip("%")))


def test_traces_written_before_stage_times_read_as_unknown(tmp_path):
    _trace(tmp_path / "a.jsonl", 4, 1.0, "incumbent", stages=False)
    cells = [c.strip() for c in report([str(tmp_path / "a.jsonl")]).splitlines()[2].split("|")]
    assert cells[5] == "-" and cells[4] == "0.150"
    assert report([str(tmp_path / "a.jsonl")]).endswith("(no stage times in these traces)")
