"""The FP8 grouped GEMM's measured dispatch (:mod:`kernel_ratchet.kernels.grouped_gemm.dispatch`):
which layers the table sends to the bf16 path, what a call then runs, and how a step table
becomes the dispatch table."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from kernel_ratchet.kernels.gemm.dispatch import load_table, parse_table
from kernel_ratchet.kernels.grouped_gemm import bench, dispatch
from kernel_ratchet.kernels.grouped_gemm import fp8 as fp8_mod
from kernel_ratchet.kernels.grouped_gemm.prepared_weight import prepare_weight


def _layer(tokens, experts, N, K, fp8, bf16, prep=math.nan):
    return (tokens, experts, N, K, {"step": bf16, "fp8_step": fp8, "fp8_prep": prep})


@pytest.fixture
def table(grouped_dispatch_table):
    return grouped_dispatch_table


def test_rows_are_placed_by_tokens_per_expert_and_a_prepared_step_has_its_own():
    rows = dispatch.measured_rows(
        [
            _layer(65536, 256, 4096, 7168, fp8=28.0, bf16=21.0, prep=17.0),
            _layer(8192, 8, 14336, 4096, fp8=5.0, bf16=6.0),  # no prepared step timed
            _layer(4096, 8, 4096, 4096, fp8=math.nan, bf16=1.0),  # FP8 failed: no row
        ]
    )
    got = {(r.granularity, r.M, r.N, r.K, r.faster) for r in rows}
    assert got == {
        (dispatch.PER_CALL, 256, 4096, 7168, "bf16"),
        (dispatch.PREPARED, 256, 4096, 7168, "fp8"),
        (dispatch.PER_CALL, 1024, 14336, 4096, "fp8"),
    }


def test_the_nearest_measured_layer_decides_and_none_near_keeps_fp8(table):
    table(_layer(65536, 256, 4096, 7168, fp8=28.0, bf16=21.0, prep=17.0))
    # same tokens per expert on half the experts, and N within a factor of two: bf16
    assert dispatch.fp8_path(32768, 128, 4096, 7168) == "bf16"
    assert dispatch.fp8_path(65536, 256, 5120, 7168) == "bf16"
    assert dispatch.fp8_path(65536, 256, 4096, 7168, prepared=True) == "fp8"
    # four times the tokens per expert: nothing measured near, the caller's FP8 stands
    assert dispatch.fp8_path(262144, 256, 4096, 7168) == "fp8"


def test_no_table_keeps_fp8_and_a_bad_one_names_its_command(tmp_path, monkeypatch):
    monkeypatch.setattr(dispatch, "TABLE_PATH", tmp_path / "absent.json")
    assert dispatch.fp8_path(64, 8, 256, 256) == "fp8"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    monkeypatch.setattr(dispatch, "TABLE_PATH", bad)
    with pytest.raises(ValueError, match="grouped_gemm.bench --step --fill-dispatch"):
        dispatch.fp8_path(64, 8, 256, 256)
    load_table.cache_clear()


@pytest.fixture
def case(grouped_case):
    return grouped_case


def _paths_taken(monkeypatch) -> list[str]:
    taken: list[str] = []

    def bf16(x, w, lens):
        taken.append("bf16")
        return x.new_zeros(x.shape[0], w.shape[1])

    def fp8(x, w, lens, prepared):
        taken.append("fp8")
        return x.new_zeros(x.shape[0], w.shape[1])

    monkeypatch.setattr(fp8_mod, "grouped_gemm", bf16)
    monkeypatch.setattr(fp8_mod.GroupedGemmFp8Function, "apply", fp8)
    return taken


def test_a_call_runs_the_path_the_table_names_unless_told_not_to(case, table, monkeypatch):
    T, (G, N, K) = case.x.shape[0], case.w.shape
    table(_layer(T, G, N, K, fp8=2.0, bf16=1.0))
    taken = _paths_taken(monkeypatch)
    fp8_mod.grouped_gemm_fp8_blockwise(case.x, case.w, case.group_lens)
    fp8_mod.grouped_gemm_fp8_blockwise(case.x, case.w, case.group_lens, dispatch=False)
    table(_layer(T, G, N, K, fp8=1.0, bf16=2.0))
    fp8_mod.grouped_gemm_fp8_blockwise(case.x, case.w, case.group_lens)
    assert taken == ["bf16", "fp8", "fp8"]


def test_a_stale_prepared_weight_raises_on_the_bf16_path_too(case, table):
    T, (G, N, K) = case.x.shape[0], case.w.shape
    table(_layer(T, G, N, K, fp8=2.0, bf16=1.0, prep=2.0))
    prepared = prepare_weight(case.w)
    with torch.no_grad():
        case.w.mul_(0.5)  # an optimizer step
    with pytest.raises(ValueError, match="prepare_weight\\(w\\) again"):
        fp8_mod.grouped_gemm_fp8_blockwise(case.x, case.w, case.group_lens, prepared=prepared)


def test_a_step_table_fills_the_dispatch_table(tmp_path):
    def row(label, tokens, experts, ms, ok=True):
        return SimpleNamespace(
            shape=SimpleNamespace(M=tokens, B=experts, N=512, K=1024), ms=ms, ok=ok
        )

    rows = [
        row("a", 4096, 8, {"step": 1.0, "fp8_step": 0.8, "fp8_prep": 0.7}),
        row("b", 4096, 64, {"step": 1.0, "fp8_step": 1.3}),
        row("c", 4096, 2, {"step": 1.0, "fp8_step": 0.5}, ok=False),  # failed its SNR check
    ]
    path = tmp_path / "t.json"
    path.write_text('{"info": {}, "rows": []}')  # as shipped: empty, measured nowhere
    line = dispatch.fill(rows, path, merge=True, command="bench --step --fill-dispatch t.json")
    body = json.loads(path.read_text())
    assert line.startswith("dispatch table: 3 rows measured, 3 in")
    assert {(r["M"], r["granularity"]) for r in body["rows"]} == {
        (512, dispatch.PER_CALL),
        (512, dispatch.PREPARED),
        (64, dispatch.PER_CALL),
    }
    assert body["info"]["command"].endswith("t.json") and "torch" in body["info"]
    # a second run merged in: the measurement least favourable to FP8 stands, the run counted
    again = [row("b", 4096, 64, {"step": 1.1, "fp8_step": 0.9})]
    assert "3 in" in dispatch.fill(again, path, merge=True, command="again")
    (b,) = [r for r in json.loads(path.read_text())["rows"] if r["M"] == 64]
    assert (b["fp8_step_ms"], b["bf16_step_ms"], b["runs"]) == (1.3, 1.0, 2)


def test_a_fill_on_another_gpu_merges_into_its_own_section(tmp_path):
    path = tmp_path / "t.json"
    h200 = {"gpu": "H200", "torch": "2", "triton": "3", "command": "fill"}
    rows = dispatch.measured_rows([(4096, 64, 512, 1024, {"step": 1.0, "fp8_step": 1.5})])
    dispatch.write_table(path, rows, h200, merge=False)
    on_h100 = ({"step": 1.0, "fp8_step": 0.8}, {"step": 2.0, "fp8_step": 1.9})  # two routings
    runs = dispatch.measured_rows([(4096, 64, 512, 1024, ms) for ms in on_h100])
    assert dispatch.write_table(path, runs, h200 | {"gpu": "H100"}, merge=True) == 1
    table = parse_table(path.read_text())
    assert table.for_gpu("H200").rows[0].faster == "bf16"  # the H200's row as it was
    (h100,) = table.for_gpu("H100").rows  # two routings, one place: the worse for FP8
    assert (h100.bf16_step_ms, h100.fp8_step_ms, h100.runs, h100.faster) == (2.0, 1.9, 2, "fp8")


@pytest.mark.parametrize("order", [1, -1])
def test_routings_sharing_a_place_keep_fp8_only_where_it_won_on_each(tmp_path, order):
    def layer(tokens, ms):  # 64 experts of [N 512, K 1024]: 64 or 128 tokens per expert
        return SimpleNamespace(shape=SimpleNamespace(M=tokens, B=64, N=512, K=1024), ms=ms, ok=True)

    rows = [
        layer(4096, {"step": 1.0, "fp8_step": 0.8}),  # uniform: FP8 1.25x faster
        layer(4096, {"step": 3.0, "fp8_step": 3.1}),  # skewed, slower on both: FP8 loses
        layer(8192, {"step": 2.0, "fp8_step": 1.6}),  # another place: FP8 wins
        layer(8192, {"step": 4.0, "fp8_step": 3.5}),  # ... under both routings
    ][::order]
    path = tmp_path / "t.json"
    assert "2 in" in dispatch.fill(rows, path, merge=False, command="fill")
    table = parse_table(path.read_text())
    assert [(r.M, r.runs, r.faster) for r in sorted(table.rows, key=lambda r: r.M)] == [
        (64, 2, "bf16"),
        (128, 2, "fp8"),
    ]
    (skewed,) = [r for r in table.rows if r.M == 64]
    assert (skewed.bf16_step_ms, skewed.fp8_step_ms) == (3.0, 3.1)  # a measured pair, not mixed


@pytest.mark.parametrize(
    "args, says",
    [
        (["--step", "--merge"], "give both"),
        (["--step", "--dry-run", "--fill-dispatch", "t.json"], "needs GPU timings"),
        (["--fill-dispatch", "t.json"], "belong to --step"),
    ],
)
def test_the_bench_refuses_a_fill_it_cannot_make(args, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        bench.main(args)
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_a_layer_sent_to_bf16_gives_the_bf16_paths_bits_and_gradients(case, table):
    from kernel_ratchet.kernels.grouped_gemm.launch import grouped_gemm

    T, (G, N, K) = case.x.shape[0], case.w.shape
    table(_layer(T, G, N, K, fp8=2.0, bf16=1.0))

    def step(fn):
        x = case.x.detach().requires_grad_()
        out = fn(x, case.w, case.group_lens)
        return (out, *torch.autograd.grad(out, (x, case.w), case.dout))

    got = step(fp8_mod.grouped_gemm_fp8_blockwise)
    want = step(grouped_gemm)
    for name, a, b in zip(("out", "dx", "dw"), got, want, strict=True):
        assert torch.equal(a, b), name


@pytest.mark.gpu
def test_a_step_run_on_the_gpu_writes_a_table_the_dispatch_reads(tmp_path, monkeypatch):
    """Two layers of 512 tokens measured by the step table; each gives a per-call and a
    prepared row, and the lookup of each layer's own sizes answers what its row measured."""
    path = tmp_path / "fp8_dispatch.json"
    only = "qwen3_30b_down_uniform,mixtral_8x7b_down_uniform"
    rc = bench.main(
        ["--step", "--shapes", "moe_test_gpu", "--only", only, "--rounds", "1",
         "--prepared-weight", "--fill-dispatch", str(path)]
    )  # fmt: skip
    assert rc == 0
    table = load_table(path)
    assert table.info["command"].startswith("python -m kernel_ratchet.kernels.grouped_gemm.bench")
    assert "--rounds 1" in table.info["command"] and "gpu" in table.info
    rows = table.rows
    assert len(rows) == 4 and {r.granularity for r in rows} == {
        dispatch.PER_CALL,
        dispatch.PREPARED,
    }
    monkeypatch.setattr(dispatch, "TABLE_PATH", path)
    for r in rows:
        prepared = r.granularity == dispatch.PREPARED
        assert dispatch.fp8_path(r.M * 8, 8, r.N, r.K, prepared) == r.faster
    load_table.cache_clear()
