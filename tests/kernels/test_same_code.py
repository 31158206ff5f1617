"""``python -m kernel_ratchet.kernels.same_code``: the SASS of the shipped launches compared
across two source trees (compiled for sm_90 offline, no GPU)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels import same_code
from kernel_ratchet.kernels.gemm import census as dc
from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.grouped_gemm import configs

REPO = Path(same_code.__file__).resolve().parents[2]
STORE = "tl.store(c_ptrs, acc.to(out_ty), mask=c_mask)"


def _tree(
    tmp: Path, name: str, edit: tuple[str, str] | None, file: str = "gemm/kernel_tile.py"
) -> Path:
    root = tmp / name
    shutil.copytree(
        REPO / "kernel_ratchet",
        root / "kernel_ratchet",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    if edit:
        path = root / "kernel_ratchet/kernels" / file
        text = path.read_text()
        assert edit[0] in text
        path.write_text(text.replace(edit[0], edit[1]))
    return root


@pytest.mark.slow
def test_a_comment_keeps_the_sass_and_a_changed_store_does_not(tmp_path):
    a, b, _ = dc.inputs(Shape(label="s", M=100, N=1000, K=1000), torch.bfloat16, "cpu")
    xs = dc.census_call(lambda: launch.gemm(a, b), dry=True).launches
    assert [x.kernel for x in xs] == ["_gemm_kernel"]
    here = same_code.compiled(REPO, xs)
    comment = same_code.compiled(_tree(tmp_path, "c", (STORE, STORE + "  # stored")), xs)
    changed = same_code.compiled(
        _tree(tmp_path, "d", (STORE, STORE.replace("acc.to", "(acc + 1.0).to"))), xs
    )
    assert here[0]["module"] == "kernel_ratchet.kernels.gemm.kernel"
    lines, differ, neither = same_code.compare(xs, comment, here)
    assert (differ, neither) == (0, 0) and "same SASS" in lines[0]
    lines, differ, _ = same_code.compare(xs, changed, here)
    assert differ == 1 and "DIFFERENT SASS" in lines[0]


@pytest.mark.slow
def test_a_gluon_kernel_is_compared_through_its_launchers_offline_compile(tmp_path):
    kernel = "kernel_ratchet.kernels.gemm.wgrad_ws_launch" + same_code.OFFLINE
    xs = [same_code.Launch(kernel, (), (("block_k", 256), ("group_n", 16), ("stages", 3)), ())]
    store = "c_buf.store(acc.to(dw_desc.dtype))"
    file = "gemm/wgrad_ws.py"
    here = same_code.compiled(REPO, xs)
    comment = same_code.compiled(_tree(tmp_path, "c", (store, store + "  # out"), file), xs)
    changed = same_code.compiled(
        _tree(tmp_path, "d", (store, store.replace("acc.to", "(acc * 2.0).to")), file), xs
    )
    assert here[0]["module"] == "kernel_ratchet.kernels.gemm.wgrad_ws_launch"
    lines, differ, neither = same_code.compare(xs, comment, here)
    assert (differ, neither) == (0, 0) and "same SASS" in lines[0]
    assert lines[0].startswith("wgrad_ws_launch(block_k=256")
    lines, differ, _ = same_code.compare(xs, changed, here)
    assert differ == 1 and "DIFFERENT SASS" in lines[0]


def test_the_gluon_set_holds_each_shipped_gluon_config():
    names = {x.kernel.split(".")[-2] for x in same_code.gluon_launches()}
    assert {"fp8_block_ws_launch", "fp8_ws_launch"} <= names
    assert ("wgrad_ws_launch" in names) == (configs.WGRAD_WS is not None)
    shipped = configs.MM_WS is not None or configs.DGRAD_WS is not None
    assert ("mm_ws_launch" in names) == shipped


def test_the_gluon_set_compiles_the_weight_gradients_entries_with_column_scales():
    """A ``_cols`` entry of the dense WS configs is compiled as it launches: one B scale per
    column (the column-scale kernel), the other entries with 128x128 weight blocks."""
    from kernel_ratchet.kernels.gemm.configs import WS_CONFIGS

    dense = [
        dict(x.constexprs)
        for x in same_code.gluon_launches()
        if x.kernel.split(".")[-2] == "fp8_block_ws_launch"
    ]
    cols = sum(len(b) for k, b in WS_CONFIGS.items() if k.endswith("_cols"))
    assert cols and sum(d.get("b_scale_group_n") == 1 for d in dense) == cols
    assert len(dense) > cols  # the forward's and dgrad's entries, default 128x128 blocks


def test_the_gluon_set_holds_the_grouped_fp8_weight_gradient_where_it_ships(monkeypatch):
    wgrad = configs.TileConfig(128, 128, 128, GROUP_M=4, num_warps=4, num_stages=5, gluon_ws=True)
    monkeypatch.setattr(configs, "WGRAD_FP8_WS", None)
    assert not [x for x in same_code.gluon_launches() if "wgrad_fp8_ws" in x.kernel]
    monkeypatch.setattr(configs, "WGRAD_FP8_WS", wgrad)
    (x,) = [x for x in same_code.gluon_launches() if "wgrad_fp8_ws" in x.kernel]
    assert dict(x.constexprs) == {"block_n": 128, "stages": 5, "group_m": 4}


def test_the_quant_set_records_the_dual_kernel_as_a_gpu_launches_it():
    xs = same_code.launches(["quant"])
    assert {x.kernel for x in xs} == {"_dual_quant_kernel"} and len(xs) >= 2  # aligned, odd
    assert all(x.get("PRE_ROUND") is False and x.get("BLOCK") == 128 for x in xs)


def test_a_revision_git_does_not_know_is_a_usage_error(capsys):
    r = subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.kernels.same_code", "--against", "no-such-rev",
         "--sets", "model"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and "git cannot export 'no-such-rev'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_the_gluon_set_holds_the_linears_few_row_weight_gradient_where_it_ships(monkeypatch):
    from kernel_ratchet.kernels.gemm import configs as gemm_configs

    def wgrad_configs():
        return sorted(
            dict(x.constexprs)["block_k"]
            for x in same_code.gluon_launches()
            if x.kernel.split(".")[-2] == "wgrad_ws_launch"
        )

    shipped = wgrad_configs()
    few = gemm_configs.FewRowsWgrad(block_k=128, group_n=2, stages=5)
    monkeypatch.setattr(gemm_configs, "FEW_ROWS_WGRAD", few)
    assert wgrad_configs() == sorted([*shipped, 128])


def test_a_gluon_launcher_moved_between_packages_is_found_where_it_now_lives(tmp_path):
    """A Gluon kernel is compared through its launcher's module; a launcher moved to another
    package is the same launcher (as a Triton kernel is found by name), unless two modules of
    that name could be it."""
    from kernel_ratchet.kernels.offline_compile import launcher_module

    def write(rel: str, text: str = "def compile_offline(**kw):\n    pass\n") -> None:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    write("pkg/gemm/x_launch.py")
    write("pkg/gemm/y_launch.py", "X = 1\n")  # same name elsewhere, but no launcher
    write("pkg/other/y_launch.py")
    root = str(tmp_path)
    assert launcher_module(root, "pkg", "pkg.gemm.x_launch") == "pkg.gemm.x_launch"
    assert launcher_module(root, "pkg", "pkg.grouped.x_launch") == "pkg.gemm.x_launch"
    assert launcher_module(root, "pkg", "pkg.grouped.y_launch") == "pkg.other.y_launch"
    write("pkg/third/x_launch.py")
    assert launcher_module(root, "pkg", "pkg.grouped.x_launch") == "pkg.grouped.x_launch"

    x = same_code.Launch("pkg.gemm.x_launch" + same_code.OFFLINE, (), (("stages", 3),), ())
    same = {"sha256": "s", "lines": 9, "dropped": []}
    lines, differ, _ = same_code.compare(
        [x], [{**same, "module": "pkg.gemm.x_launch"}], [{**same, "module": "pkg.grouped.x_launch"}]
    )
    assert differ == 0 and lines[0].endswith("same SASS (9 lines; moved from pkg.grouped.x_launch)")
