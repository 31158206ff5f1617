"""tune_apply: a sweep's winner for one configs entry, written for a campaign to decide."""

from __future__ import annotations

import json
from pathlib import Path

from kernel_ratchet.kernels.gemm import configs
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.knobs.tunables import parse_tunables
from kernel_ratchet.optimizers import tune_apply

WINNER = GemmConfig(128, 64, 64, num_warps=4, num_stages=5, use_tma=True)


def _sweep(tmp_path: Path, winner_ms: float) -> Path:
    """Two medium weight gradients (``WS16_CONFIGS`` takes the medium forwards and dgrads): the
    vendor 1 ms, the shipped config 2 ms, the winner ``winner_ms``."""
    rows = []
    for shape in ([1000, 1000, 2000], [1000, 2000, 1000]):
        rows.append({"shape": shape, "what": "bf16.db", "cfg": "vendor", "ms": 1.0})
        rows.append({"shape": shape, "what": "bf16.db", "cfg": "shipped", "ms": 2.0})
        rows.append(
            {"shape": shape, "what": "bf16.db", "cfg": repr(WINNER), "ms": winner_ms, "snr": 50}
        )
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"results": rows}))
    return path


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "configs.py"
    path.write_text(Path(configs.__file__).read_text())
    return path


def test_the_winner_is_written_into_its_entry_and_nothing_else(tmp_path, capsys):
    cfg, sweep = _copy(tmp_path), _sweep(tmp_path, 1.0)
    before = cfg.read_text()
    assert tune_apply.main([str(sweep), "CONFIGS/bf16_bwd/medium", "--configs", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "shipped when swept 0.500, best 1.000" in out and "ratchet validate" in out
    knobs = parse_tunables(cfg.read_text()).entries["CONFIGS/bf16_bwd/medium"].knobs
    assert {k: knobs[k].value for k in ("block_m", "block_n", "num_warps", "num_stages")} == {
        "block_m": 128, "block_n": 64, "num_warps": 4, "num_stages": 5,
    }  # fmt: skip
    after = cfg.read_text().splitlines()
    changed = [a for a, b in zip(before.splitlines(), after, strict=True) if a != b]
    assert len(changed) == 1 and '"medium": GemmConfig(128, 128, 64' in changed[0]
    # written again: the entry already is the winner
    assert tune_apply.main([str(sweep), "CONFIGS/bf16_bwd/medium", "--configs", str(cfg)]) == 1
    assert "nothing written" in capsys.readouterr().out


def test_nothing_is_written_without_a_gain_or_for_an_unknown_entry(tmp_path, capsys):
    cfg = _copy(tmp_path)
    before = cfg.read_text()
    small = _sweep(tmp_path, 1.98)  # 1% faster than the shipped config
    assert tune_apply.main([str(small), "CONFIGS/bf16_bwd/medium", "--configs", str(cfg)]) == 1
    assert "no candidate beats that by 3%" in capsys.readouterr().out
    assert tune_apply.main([str(small), "CONFIGS/bf16/nope", "--configs", str(cfg)]) == 2
    assert "no entry 'CONFIGS/bf16/nope'" in capsys.readouterr().err
    assert cfg.read_text() == before


def test_an_entry_is_ranked_on_the_gemms_the_shipped_configs_run_it_for():
    few, tiny = (
        tune_apply.runs_entry("FEW_ROWS_INSTEAD/bf16/tiny"),
        tune_apply.runs_entry("CONFIGS/bf16/tiny"),
    )
    bound = configs.FEW_ROWS_MAX_M["bf16"]["tiny"]
    assert few("bf16", bound, 4096, 4096) and not tiny("bf16", bound, 4096, 4096)
    assert tiny("bf16", bound + 1, 1000, 1000) and not few("bf16", bound + 1, 1000, 1000)
    assert not tune_apply.runs_entry("CONFIGS/bf16/nope")("bf16", 1, 1, 1)


def test_the_gemms_the_ws16_route_serves_do_not_rank_a_configs_entry():
    """Where ``WS16_CONFIGS`` routes the forward and the dgrad of a bucket to the Gluon kernel,
    the sweep's "shipped" time there is that kernel's: the ``CONFIGS`` entry serves only the
    weight gradient (and any GEMM where the route has no entry)."""
    routed = configs.WS16_CONFIGS["bf16"]
    assert "large" in routed  # the shipped route
    fwd = tune_apply.runs_entry("CONFIGS/bf16/large")
    bwd = tune_apply.runs_entry("CONFIGS/bf16_bwd/large")
    assert not fwd("bf16", 4096, 6144, 4096, "bf16.fwd")
    assert not bwd("bf16_bwd", 4096, 4096, 6144, "bf16.da")
    assert bwd("bf16_bwd", 6144, 4096, 4096, "bf16.db")
    assert fwd("bf16", 4096, 6144, 4096)  # no layout named: as before the route


def test_a_winner_of_another_kernel_is_not_written_into_a_configs_entry(tmp_path, capsys):
    """A sweep's Gluon-kernel launches (``Ws16(...)``) are scored beside the Triton configs but
    belong to their own table: the entry gets the best Triton config."""
    sweep = _sweep(tmp_path, 1.0)
    data = json.loads(sweep.read_text())
    for shape in ([1000, 1000, 2000], [1000, 2000, 1000]):
        ws = "Ws16(block_n=128, stages=6, block_k=64, group_m=8)"
        data["results"].append({"shape": shape, "what": "bf16.db", "cfg": ws, "ms": 0.5, "snr": 50})
    sweep.write_text(json.dumps(data))
    best, said = tune_apply.candidate(
        data["results"],
        "CONFIGS/bf16_bwd/medium",
        0.03,
        tune_apply.runs_entry("CONFIGS/bf16_bwd/medium"),
    )
    assert best == repr(WINNER), said
