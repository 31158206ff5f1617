"""The exhaustive sweep and its comparison with a campaign on the CPU: the scaffolded gemm_bf16
example (interpreter, tiny shapes) swept over two knobs of its forward and backward entries,
then its tree measured against the sweep's best with the paired A/B. The timings are
meaningless; what is tested is that each configuration is really in force when measured, that
the joint space is scored from the per-entry sweeps, and what the JSONs hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ratchet.campaign.example import scaffold
from kernel_ratchet.knobs.tunables import parse_tunables, set_knobs
from kernel_ratchet.optimizers import sweep_compare, sweep_measure
from kernel_ratchet.optimizers.base import OptimizerError

SWEEP = [sys.executable, "-m", "kernel_ratchet.cli", "sweep"]
COMPARE = [sys.executable, "-m", "kernel_ratchet.cli", "sweep-compare"]


def test_applied_text_is_what_the_kernel_launches_with():
    sweep = sweep_measure
    from kernel_ratchet.kernels.gemm import configs, launch_plan

    path = Path(configs.__file__)
    original = path.read_text()
    # the name launch_plan.py imported; 100 rows: the tiny bucket's entry (not FEW_ROWS_INSTEAD)
    before = launch_plan.config_for("bf16", 100, 8, 8)
    try:
        sweep.apply_text(
            configs, set_knobs(original, "CONFIGS/bf16/tiny", {"block_m": 16}), str(path)
        )
        assert launch_plan.config_for("bf16", 100, 8, 8).block_m == 16 != before.block_m
    finally:
        sweep.apply_text(configs, original, str(path))
    assert launch_plan.config_for("bf16", 100, 8, 8) == before
    assert path.read_text() == original  # the file on disk is never written


def test_each_phase_needs_exactly_one_entry():
    sweep = sweep_measure
    assert sweep.parse_entries(["A=fwd", "B=bwd"], True) == {"A": "fwd", "B": "bwd"}
    assert sweep.parse_entries(["A"], True) == {"A": "both"}
    with pytest.raises(OptimizerError, match="bwd phase"):
        sweep.parse_entries(["A=fwd"], True)
    with pytest.raises(OptimizerError, match="fwd phase"):
        sweep.parse_entries(["A=both", "B=fwd"], True)
    with pytest.raises(OptimizerError, match="one of"):
        sweep.parse_entries(["A=step"], False)


def _campaign(tmp_path: Path, shapes: list[dict], representative: list[str]) -> Path:
    from dataclasses import fields

    from kernel_ratchet.campaign.manifest import Manifest

    values = {f.name: None for f in fields(Manifest)}
    values.update(
        target_shapes=shapes,
        representative_shapes=representative,
        timing_params={},
        csv_schema={},
        kernel_source=[],
    )
    cdir = tmp_path / "campaign"
    cdir.mkdir()
    Manifest(**values).save(cdir)
    return cdir


def test_compare_shapes_are_the_sweeps_then_the_campaigns_representative_ones(tmp_path):
    shape = lambda label, m: {"label": label, "M": m, "N": 64, "K": 64, "B": 1}  # noqa: E731
    cdir = _campaign(tmp_path, [shape("a", 16), shape("b", 32), shape("c", 48)], ["b", "c"])
    sweep = {"shapes": [shape("c", 48), shape("d", 8)]}
    got = sweep_compare.shapes_of(sweep, cdir)
    assert [(s.label, s.M) for s in got] == [("c", 48), ("d", 8), ("b", 32)]
    assert [s.label for s in sweep_compare.shapes_of(sweep, None)] == ["c", "d"]


def test_compare_checks_the_campaign_searched_the_swept_space(tmp_path):
    same_space = sweep_compare.same_space
    sweep = {"knobs": ["num_warps", "block_m"]}
    cdir = tmp_path / "c"
    cdir.mkdir()
    assert same_space(sweep, None) is None and same_space(sweep, cdir) is None  # no record
    (cdir / "optimizer.json").write_text('{"name": "search", "knobs": ["block_m", "num_warps"]}')
    assert same_space(sweep, cdir) is None
    (cdir / "optimizer.json").write_text('{"name": "search", "knobs": null}')
    assert "moved every knob" in same_space(sweep, cdir)


def test_compare_verdicts_say_which_bound_holds():
    verdict = sweep_compare.verdict
    assert verdict(0.99, 0.975, 1.01, 0.97).startswith("MET: ")
    assert verdict(0.98, 0.96, 1.0, 0.97).startswith("MET (point estimate)")
    assert verdict(0.95, 0.93, 0.97, 0.97).startswith("MISSED")


@pytest.mark.slow
@pytest.mark.soak
def test_sweep_of_the_rehearsal_example(tmp_path):
    root, op = scaffold("gemm_bf16", tmp_path / "ex", rehearse=True)
    out = tmp_path / "sweep.json"
    # the project first, then this checkout's kernel_ratchet (what the test session imports)
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "TRITON_INTERPRET": "1"}
    r = subprocess.run(
        [
            *SWEEP,
            "--op",
            op,
            "--knobs",
            "num_warps,block_m",
            "--entry",
            "CONFIGS/bf16/tiny=fwd",
            "--entry",
            "CONFIGS/bf16_bwd/tiny=bwd",
            "--shapes",
            "2",
            "-o",
            str(out),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(out.read_text())
    # 2 warps x 3 block_m per entry, and the backward's shipped block_m (16, outside its
    # space) added: every one measured; 6 x 8 combinations scored, the shipped one among them
    assert d["planned"] == {"CONFIGS/bf16/tiny": 6, "CONFIGS/bf16_bwd/tiny": 8}
    fwd_rows, bwd_rows = d["measured"]["CONFIGS/bf16/tiny"], d["measured"]["CONFIGS/bf16_bwd/tiny"]
    assert all("shapes" in row for row in fwd_rows + bwd_rows), r.stderr[-2000:]
    assert d["combinations"] == 48 and len(d["shapes"]) == 2
    # an entry's sweep times only the phase it governs
    one = next(iter(fwd_rows[0]["shapes"].values()))
    assert one["fwd"] and one["bwd"] is None
    one = next(iter(bwd_rows[0]["shapes"].values()))
    assert one["bwd"] and one["fwd"] is None
    # best first, the shipped combination scored among them, best_text has the best values in
    assert d["best"]["aggregate"] == max(c["aggregate"] for c in d["top"])
    assert d["shipped_aggregate"] is not None and d["best"]["aggregate"] >= d["shipped_aggregate"]
    t = parse_tunables(d["best_text"])
    for entry, cfg in d["best"]["configs"].items():
        assert {k: t.entries[entry].knobs[k].value for k in cfg} == cfg
    assert (root / "ratchet_example_gemm/configs.py").read_text() != d["best_text"] or (
        d["best"]["configs"] == d["shipped"]
    )
    # a resumed sweep keeps every measured configuration; --budget-s 0 measures nothing more
    again = subprocess.run(
        [
            *SWEEP,
            "--op",
            op,
            "--knobs",
            "num_warps,block_m",
            "--entry",
            "CONFIGS/bf16/tiny=fwd",
            "--entry",
            "CONFIGS/bf16_bwd/tiny=bwd",
            "--shapes",
            "2",
            "-o",
            str(out),
            "--resume",
            "--budget-s",
            "0",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0 and "resumed: 14 configurations kept" in again.stderr
    d2 = json.loads(out.read_text())
    assert d2["measured"] == d["measured"] and d2["best"] == d["best"] and "cut" not in d2
    with pytest.raises(OptimizerError, match="differs in"):
        sweep_measure.previous({**d, "knobs": ["num_warps"]}, d)
    # --campaign: that campaign's representative shapes
    cdir = _campaign(tmp_path, d["shapes"], [d["shapes"][1]["label"]])
    one = subprocess.run(
        [
            *SWEEP,
            "--op",
            op,
            "--knobs",
            "num_warps",
            "--entry",
            "CONFIGS/bf16/tiny=fwd",
            "--entry",
            "CONFIGS/bf16_bwd/tiny=bwd",
            "--campaign",
            str(cdir),
            "-o",
            str(tmp_path / "one.json"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert one.returncode == 0, one.stderr[-2000:]
    assert json.loads((tmp_path / "one.json").read_text())["shapes"] == [d["shapes"][1]]
    # the tree (here: the shipped configuration) against a sweep best that differs from it:
    # measured with the paired A/B; against one that is the same file: nothing to measure
    shipped_text = (root / "ratchet_example_gemm/configs.py").read_text()
    other = {**d, "best_text": set_knobs(shipped_text, "CONFIGS/bf16/tiny", {"num_warps": 8})}
    assert other["best_text"] != shipped_text
    # the sweep's own copy of the file may differ from the campaign's in comments only (a
    # docstring edited since the sweep): still the same configuration
    reworded = shipped_text.replace('"""', '"""Reworded. ', 1)
    assert reworded != shipped_text
    for name, sweep_json in (
        ("other", other),
        ("same", {**d, "best_text": shipped_text}),
        ("reworded", {**d, "best_text": reworded}),
    ):
        (tmp_path / f"{name}.json").write_text(json.dumps(sweep_json))
        r = subprocess.run(
            [
                *COMPARE,
                "--sweep",
                str(tmp_path / f"{name}.json"),
                "-o",
                str(tmp_path / f"cmp_{name}.json"),
                "--k-max",
                "3",
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    c = json.loads((tmp_path / "cmp_other.json").read_text())
    assert c["shapes"] == [s["label"] for s in d["shapes"]] and c["rounds"] == 3
    assert not c["same_configuration"]
    lo, hi = c["ci"]
    assert lo <= c["ratio"] <= hi and c["verdict"].split(":")[0] in (
        "MET",
        "MET (point estimate)",
        "MISSED",
    )
    same = json.loads((tmp_path / "cmp_same.json").read_text())
    assert same["same_configuration"] and "run" not in same
    assert same["verdict"].startswith("MET: the campaign ended at the sweep's best")
    reworded = json.loads((tmp_path / "cmp_reworded.json").read_text())
    assert reworded["same_configuration"] and "run" not in reworded
