"""The search over knobs found in kernels as written: it moves their own launch parameters and
autotune configs, and refuses to start when there is nothing to move."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import torch

from kernel_ratchet.campaign.record import verified_ineffective
from kernel_ratchet.knobs.space import collect
from kernel_ratchet.optimizers.base import OptimizerContext, OptimizerError
from kernel_ratchet.optimizers.search import SearchOptimizer
from kernel_ratchet.optimizers.testing import recorded_round
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.test_cli_errors import run_main

FIXTURES = Path(__file__).parents[1] / "knobs" / "fixtures"
FILES = ("pkg/settings.py", "pkg/autotuned.py")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / Path(rel).name, tmp_path / rel)
    return tmp_path


def context(root: Path, records=(), kernel_source=FILES) -> OptimizerContext:
    manifest = {"target_op": "row_sum", "kernel_source": list(kernel_source)}
    sources = {rel: (root / rel).read_text() for rel in kernel_source}
    return OptimizerContext(
        root=root,
        manifest=manifest,
        sources=sources,
        rounds=tuple(records),
        ineffective=tuple(verified_ineffective(list(records))),
    )


def test_the_first_move_is_a_launch_parameter_of_the_kernel_as_written(project):
    p = SearchOptimizer().propose(context(project, kernel_source=FILES[:1]))
    assert set(p.files) == {"pkg/settings.py"} and p.bucket == "K1"
    assert p.direction == "pkg/settings.py@row_sum/_row_sum_kernel[]:BLOCK_SIZE=2.0"
    assert "BLOCK_SIZE=BLOCK_SIZE * 2" in p.files["pkg/settings.py"]
    assert "computed at run time" in p.hypothesis
    assert "BLOCK_SIZE x1.0 -> x2.0" in p.summary  # a factor, not the block size itself
    # from x2 the search tries x4 before x1/2 (a block that covers a whole row stays correct)
    (project / "pkg/settings.py").write_text(p.files["pkg/settings.py"])
    won = recorded_round(2, "ACCEPTED", "ok", "h", p.direction, 0.1, summary=p.summary)
    again = SearchOptimizer().propose(context(project, [won], FILES[:1]))
    assert again.direction.endswith("BLOCK_SIZE=4.0")


def test_every_move_is_tried_once_then_the_search_ends(project):
    records = [recorded_round(1, "BASELINE", "baseline", "Baseline", "")]
    originals = {rel: (project / rel).read_text() for rel in FILES}
    seen = []
    while (p := SearchOptimizer().propose(context(project, records))) is not None:
        ((rel, text),) = p.files.items()
        changed = [
            a != b for a, b in zip(originals[rel].splitlines(), text.splitlines(), strict=True)
        ]
        assert sum(changed) == 1, p.direction  # one readable line edit
        ast.parse(text)
        seen.append(p.direction)
        n = len(records) + 1
        records.append(recorded_round(n, "ROLLED BACK", "no-gain", "h", p.direction, -0.02))
        assert len(seen) < 100
    space = collect(originals, FILES)
    assert len(seen) == len(set(seen)) == sum(len(v) - 1 for *_, v in space.knobs("row_sum"))
    assert {d.split("@")[0] for d in seen} == set(FILES)


def test_nothing_to_move_is_refused_before_the_campaign(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/k.py").write_text("def f(x):\n    return x\n")
    with pytest.raises(OptimizerError, match=r"nothing the search can move.*ops\.row_sum\.knobs"):
        SearchOptimizer().propose(context(tmp_path, kernel_source=["pkg/k.py"]))


def _profile(root: Path, kernel: str) -> Path:
    (root / "pkg").mkdir(exist_ok=True)
    (root / "pkg/k.py").write_text(kernel)
    op = (
        "kernel_source: [pkg/k.py]\n    backend: TRITON\n    lang: triton\n"
        "    campaign_type: memory\n    test: pytest\n    benchmark: bench\n"
        "    adapter: pkg.a:A\n    shapes: pkg.s:S\n"
    )
    head = (
        "project: p\npackage: pkg\ninstall: pip install -e .\nfull_test: pytest\n"
        "campaign_root: .ratchet/campaigns\ntips_root: tips\n"
    )
    path = root / "ratchet.yaml"
    path.write_text(f"{head}ops:\n  norm:\n    {op}")
    return path


def test_ratchet_run_with_no_knobs_is_a_usage_error_at_start(tmp_path, monkeypatch, capsys):
    path = _profile(tmp_path, "def f(x):\n    return x\n")
    args = ("run", "--op", "norm", "--optimizer", "search", "--yes", "--profile", str(path))
    code, out = run_main(monkeypatch, capsys, *args)
    assert code == 2 and "Traceback" not in out
    assert "nothing the search can move" in out and "ops.norm.knobs" in out
    assert not (tmp_path / ".ratchet").exists()  # refused before any campaign was created
    # a declared knob is enough to pass the start check
    with path.open("a") as f:
        f.write("    knobs: [{name: f, file: pkg/k.py, values: [1, 2]}]\n")
    (tmp_path / "pkg/k.py").write_text("f = 1\n")
    SearchOptimizer().check_ready(tmp_path, load_profile(path).op("norm"))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # triton's jit reads the kernel's module
    spec.loader.exec_module(mod)
    return mod


def test_the_moved_kernels_still_compute_their_result(project, device):
    # recorded outcome: doubling a computed launch parameter wins, every other move loses
    records = [recorded_round(1, "BASELINE", "baseline", "Baseline", "")]
    while (p := SearchOptimizer().propose(context(project, records, FILES[:1]))) is not None:
        win = p.direction.endswith("=2.0")
        if win:
            p.apply_to(project)
        status, category = ("ACCEPTED", "ok") if win else ("ROLLED BACK", "no-gain")
        records.append(recorded_round(len(records) + 1, status, category, "h", p.direction, 0))
        assert len(records) < 40
    text = (project / "pkg/settings.py").read_text()
    assert "BLOCK_SIZE=BLOCK_SIZE * 2" in text and "num_warps=min(num_warps * 2, 32)" in text
    mod = _load(project / "pkg/settings.py", f"kr_moved_settings_{id(project)}")
    x = torch.randn(3, 37, device=device)
    torch.testing.assert_close(mod.row_sum(x), x.sum(dim=1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_a_moved_autotune_config_still_compiles_and_runs(project):
    # the interpreter cannot autotune (it has no driver to time the configs with)
    records = [recorded_round(1, "BASELINE", "baseline", "Baseline", "")]
    for _ in range(4):  # BLOCK_SIZE, num_warps and num_stages of the configs
        p = SearchOptimizer().propose(context(project, records, FILES[1:]))
        p.apply_to(project)
        records.append(recorded_round(len(records) + 1, "ACCEPTED", "ok", "h", p.direction, 0.1))
    mod = _load(project / "pkg/autotuned.py", f"kr_moved_autotuned_{id(project)}")
    y = torch.randn(5000, device="cuda")
    torch.testing.assert_close(mod.scale(y, 2.0), y * 2.0)


def test_a_candidate_list_move_says_it_narrows_the_autotuner(tmp_path: Path):
    """A comprehension-built autotune config list (fla's style) is searched as found, and the
    hypothesis says what the move does: the autotuner chooses among fewer candidates."""
    from tests.knobs.test_discover import LIBRARY_AUTOTUNED

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/norm.py").write_text(LIBRARY_AUTOTUNED)
    p = SearchOptimizer().propose(context(tmp_path, kernel_source=("pkg/norm.py",)))
    assert p.direction == "pkg/norm.py@norm_kernel.configs.w:w=[2]"
    assert "for w in [2] for bt in WIDTHS" in p.files["pkg/norm.py"]
    assert "the autotuner then picks among [2] only" in p.hypothesis


def test_the_search_leaves_out_the_knobs_of_kernels_the_op_never_launched(project, device):
    """The harness records the kernels an op launches (here ``row_sum``'s, not ``scale``'s);
    the search then moves only their knobs, and all of them when nothing was recorded."""
    import dataclasses

    from kernel_ratchet.harness import launches
    from kernel_ratchet.harness.interpreter import install

    if device == "cpu":
        install()  # the autotuned kernel runs in the interpreter too
    settings = _load(project / "pkg/settings.py", f"kr_launch_settings_{id(project)}")
    autotuned = _load(project / "pkg/autotuned.py", f"kr_launch_autotuned_{id(project)}")
    x = torch.randn(3, 37, device=device)
    with launches.recording() as names:
        settings.row_sum(x)
    assert names == {"_row_sum_kernel"}
    with launches.recording() as scaled:
        autotuned.scale(x.flatten(), 2.0)
    assert scaled == {"_scale_kernel"}  # through the autotuner
    art = project / "campaign/rounds/round-1/artifacts"
    art.mkdir(parents=True)
    launches.write(art / launches.FILE, {"s": names})

    def directions(ctx: OptimizerContext) -> set[str]:
        records, seen = list(ctx.rounds), set()
        while p := SearchOptimizer().propose(dataclasses.replace(ctx, rounds=tuple(records))):
            seen.add(p.direction)
            n = len(records) + 1
            records.append(recorded_round(n, "ROLLED BACK", "no-gain", "h", p.direction, -0.02))
            assert len(seen) < 100
        return {d.split("@")[0] for d in seen}

    base = [recorded_round(1, "BASELINE", "baseline", "Baseline", "")]
    recorded = dataclasses.replace(context(project, base), campaign_dir=project / "campaign")
    assert directions(recorded) == {"pkg/settings.py"}
    assert directions(context(project, base)) == set(FILES)


def test_a_rehearsed_move_is_not_proposed_again(project):
    """A rehearsal rolls every round back without a timing verdict; the search then goes on
    to the next move instead of rehearsing the same one for ever."""
    records = [recorded_round(1, "BASELINE", "baseline", "Baseline", "")]
    first = SearchOptimizer().propose(context(project, records, FILES[:1]))
    records.append(recorded_round(2, "ROLLED BACK", "rehearsal", "h", first.direction, 0.03))
    second = SearchOptimizer().propose(context(project, records, FILES[:1]))
    assert second is not None and second.direction != first.direction


def test_every_kernel_of_the_ops_files_is_searched_whatever_the_ops_name(tmp_path):
    """The op-name kinds pick a shared tunables table's entries, never a kernel file's: the
    backward's launch of ``row_sum`` is searched though its kernel's name shares no word."""
    text = (
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def _row_kernel(x_ptr, B: tl.constexpr):\n    pass\n\n\n@triton.jit\n"
        "def _col_kernel(x_ptr, B: tl.constexpr):\n    pass\n\n\n"
        "def fwd(x):\n    _row_kernel[(1,)](x, B=16)\n\n\n"
        "def bwd(x):\n    _col_kernel[(1,)](x, B=16)\n"
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/k.py").write_text(text)
    ctx = context(tmp_path, kernel_source=("pkg/k.py",))
    space = collect(ctx.sources, ["pkg/k.py"])
    moved = {move[0].key for _, move in SearchOptimizer().all_moves(space, ctx)}
    assert moved == {"pkg/k.py@fwd/_row_kernel[]", "pkg/k.py@bwd/_col_kernel[]"}
