"""The search space of an op over all its sources, counted the way `ratchet check` shows it."""

from __future__ import annotations

import math
from pathlib import Path

from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.knobs.space import collect, nothing_to_move
from kernel_ratchet.optimizers.testing import TOY_KERNEL

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = {
    "pkg/autotuned.py": (FIXTURES / "autotuned.py").read_text(),
    "pkg/settings.py": (FIXTURES / "settings.py").read_text(),
    "pkg/kernel.py": TOY_KERNEL,
}


def test_points_are_the_product_of_the_values_of_each_knob():
    space = collect(SOURCES, ["pkg/settings.py"])
    knobs = {name: values for _, name, values in space.knobs("op")}
    # BLOCK_SIZE and num_warps move by a factor, num_stages (omitted) from Triton's default
    assert knobs == {
        "BLOCK_SIZE": [1.0, 2.0, 0.5, 4.0],
        "num_warps": [1.0, 2.0, 0.5, 4.0, 0.25],
        "num_stages": [3, 2, 4],
    }
    assert space.describe("op") == "3 knobs, 60 points (launch 3)"


def test_every_source_counts_and_the_tunables_file_keeps_its_convention():
    space = collect(SOURCES, list(SOURCES), tunables="pkg/kernel.py")
    kinds = [(fs.rel, fs.source) for fs in space.files]
    # the tunables file is a kernel file too: read by its convention and for launches
    assert kinds == [
        ("pkg/kernel.py", "tunables"),
        ("pkg/kernel.py", "kernel"),
        ("pkg/autotuned.py", "kernel"),
        ("pkg/settings.py", "kernel"),
    ]
    knobs = space.knobs("op")
    points = math.prod(len(v) for *_, v in knobs)
    assert space.describe("op") == (
        f"{len(knobs)} knobs, {points:,} points (tunables 3, autotune 6, launch 3)"
    )


def test_an_op_with_nothing_to_move_is_empty_and_told_how_to_declare():
    plain = {"pkg/k.py": "def f(x):\n    return x\n"}
    space = collect(plain, ["pkg/k.py"])
    assert space.empty("op")
    msg = nothing_to_move("op", ["pkg/k.py"])
    assert "ops.op.knobs" in msg and "file: pkg/k.py" in msg and "values:" in msg
    decl = KnobDecl("f", "pkg/k.py", ())
    assert collect(plain, ["pkg/k.py"], decls=[decl]).unmatched == (decl,)


def test_unreadable_files_and_declarations_outside_the_kernel_files_are_named():
    space = collect(
        {"pkg/bad.py": "def (:\n"},
        ["pkg/bad.py", "pkg/missing.py"],
        tunables="pkg/tunables.py",
        decls=[KnobDecl("X", "pkg/other.py", (1,))],
    )
    assert any("pkg/bad.py does not parse" in p for p in space.problems)
    assert any("pkg/tunables.py cannot be read" in p for p in space.problems)
    # a listed kernel file a round may create: nothing to move in it yet, and no problem
    assert not any("pkg/missing.py" in p for p in space.problems)
    assert [d.file for d in space.unmatched] == ["pkg/other.py"]


def test_a_launch_of_a_plain_kernel_from_another_file_gets_warps_and_stages():
    kernel = "import triton\n\n\n@triton.jit\ndef _k(x_ptr, BLOCK: tl.constexpr):\n    pass\n"
    launch = "from pkg.kernel import _k\n\n\ndef run(x):\n    _k[(1,)](x, BLOCK=64)\n"
    space = collect(
        {"pkg/kernel.py": kernel, "pkg/launch.py": launch}, ["pkg/kernel.py", "pkg/launch.py"]
    )
    names = {name: values[0] for _, name, values in space.knobs("op")}
    assert names == {"BLOCK": 64, "num_warps": 4, "num_stages": 3}
    alone = collect({"pkg/launch.py": launch}, ["pkg/launch.py"])
    assert {name for _, name, _ in alone.knobs("op")} == {"BLOCK"}  # unknown kernel: no defaults


def test_a_kernel_files_knobs_are_the_ops_whatever_its_name():
    """Op names pick a shared tunables table's kinds; a kernel file's entries (a declared knob
    in a host function, a launch) belong to every op that lists the file."""
    text = (
        "import triton\n\n\n@triton.jit\ndef rms_norm_kernel(x_ptr, B: tl.constexpr):\n"
        "    pass\n\n\ndef backward(x):\n    ROW_BLOCK_SIZE = 16\n"
        "    rms_norm_kernel[(1,)](x, ROW_BLOCK_SIZE)\n"
    )
    decl = KnobDecl("ROW_BLOCK_SIZE", "ops/rms_norm.py", (8, 16, 32), within="backward")
    space = collect({"ops/rms_norm.py": text}, ["ops/rms_norm.py"], decls=[decl])
    for op in ("rms_norm", "norm_bwd", "rmsnorm", "softmax"):
        names = {name for _, name, _ in space.knobs(op)}
        assert "ROW_BLOCK_SIZE" in names and "num_warps" in names, op


def test_kernel_files_that_are_not_python_hold_no_knob_and_a_knob_declared_there_is_refused():
    kernel = "import triton\n\n\n@triton.jit\ndef _k(x_ptr, BLOCK: tl.constexpr):\n    pass\n"
    launch = kernel + "\n\ndef run(x):\n    _k[(1,)](x, BLOCK=64)\n"
    sources = {"pkg/k.py": launch, "pkg/k.cu": "__global__ void k() {}\n", "pkg/t.yaml": "a: 1\n"}
    files = ["pkg/k.py", "pkg/k.cu", "pkg/t.yaml"]
    space = collect(sources, files)
    assert not space.problems and {n for _, n, _ in space.knobs("op")} >= {"BLOCK", "num_warps"}
    decl = KnobDecl("TILE_N", "pkg/t.yaml", (32, 64))
    refused = collect(sources, files, decls=[decl]).problems
    assert len(refused) == 1 and "TILE_N is declared in pkg/t.yaml" in refused[0]
    assert "not a Python file" in refused[0]


def test_nothing_to_move_names_the_autotune_configs_it_cannot_read():
    text = (
        "import triton\nfrom pkg.util import warps_configs, conv_config\n\n\n"
        "@triton.autotune(configs=warps_configs(), key=['n'])\n@triton.jit\n"
        "def _norm(x_ptr, n):\n    pass\n\n\n"
        "@triton.autotune(configs=[conv_config(128, 32, n_warps=8)], key=['n'])\n@triton.jit\n"
        "def _conv(x_ptr, n):\n    pass\n"
    )
    space = collect({"pkg/k.py": text}, ["pkg/k.py"])
    assert space.empty("op")
    msg = nothing_to_move("op", ["pkg/k.py"], space.unread)
    assert "pkg/k.py: _norm's autotune configs are built at run time by warps_configs()" in msg
    assert "_conv's autotune configs are calls of conv_config(...), not triton.Config" in msg
    assert "no @triton.autotune configs" not in msg
    assert "no @triton.autotune configs" in nothing_to_move("op", ["pkg/k.py"])
