"""The census of a Linear call (:mod:`kernel_ratchet.kernels.gemm.census`) counts what runs.

Real runs go through the interpreter on tiny shapes with forced small blocks; dry runs record
the launcher's GPU decisions on full-size shapes without running a kernel.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels.gemm import census as cs
from kernel_ratchet.kernels.gemm import configs
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.launch import forced_config, matmul

SMALL = GemmConfig(32, 32, 128, num_warps=4, num_stages=2)


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def odd_case():
    """Real runs: on the GPU there, else in the interpreter (dry runs stay on the CPU)."""
    return cs.inputs(Shape("m50.n70.k200", M=50, N=70, K=200), torch.float16, DEVICE)


def test_real_run_counts_launches_quant_passes_and_no_copies(odd_case):
    paths = cs.linear_paths(*odd_case)
    with forced_config(SMALL):
        fwd = cs.census_call(paths["16bit.fwd"], dry=False)
        step = cs.census_call(paths["fp8_block.step"], dry=False)
    assert len(fwd.launches) == 1 and fwd.copies == {}
    assert len(step.gemms()) == 3
    # 1x128 of a, 128x128 of b (+ transpose), 1x128 of dout, of doutᵀ and of aᵀ
    assert step.quant_passes() == 5


def test_aligned_operands_are_quantized_both_ways_in_one_pass_each():
    """With 16-byte rows the blockwise step quantizes a and dout once each (the dual pass)
    and b once: three passes. A dry run on a full-size shape counts them without running
    any (the dual pass included)."""
    a, b, d = cs.inputs(Shape("m50.n64.k256", M=50, N=64, K=256), torch.float16, DEVICE)
    with forced_config(SMALL):
        step = cs.census_call(cs.linear_paths(a, b, d)["fp8_block.step"], dry=False)
    assert step.quant_passes() == 3 and len(step.of(*cs._DUAL_KERNELS)) == 2
    big = cs.inputs(Shape("qkv", M=4096, N=12288, K=4096), torch.bfloat16, "cpu")
    dry = cs.census_call(cs.linear_paths(*big)["fp8_block.step"], dry=True)
    assert dry.quant_passes() == 3 and len(dry.of(*cs._DUAL_KERNELS)) == 2


def test_a_16bit_split_k_is_one_launch_without_a_zeroed_buffer_or_a_cast(odd_case):
    """The split's tiles finish themselves through slots kept zero between launches: after the
    first call (which makes the slots) a call is the GEMM's launch and nothing else."""
    a, b, _ = odd_case
    with forced_config(SMALL.with_(split_k=2)):
        matmul(a, b)
        c = cs.census_call(lambda: matmul(a, b), dry=False)
    assert c.gemms()[0].get("SPLIT_K") == 2 and c.gemms()[0].get("SPLIT_FINISH") is True
    assert len(c.launches) == 1 and c.copies == {}


def test_a_recorded_call_goes_through_the_recorder_not_a_cached_runner(monkeypatch):
    """On a GPU a geometry's later calls launch from what its first call bound (the quick
    path's entry, the plan's runner), past the kernel's ``[grid]``: while a census records a
    real run, neither is used, so a repeated call's launches are counted too."""
    from kernel_ratchet.kernels.gemm import fast_launch, quick_path

    def cached(*args):
        raise AssertionError("a cached runner launched while the census recorded")

    monkeypatch.setitem(quick_path._QUICK, ("key",), cached)
    launched = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kw: launched.append((grid, args, kw))

    with cs.Census().record(dry=False):
        assert quick_path.get(("key",)) is None
        fast_launch.launch(Kernel(), {("sig",): cached}, (3,), (1, 2), {"X": 4}, 1, ("sig",))
    assert launched == [((3,), (1, 2), {"X": 4})]
    assert quick_path.get(("key",)) is cached  # put back afterwards


def test_a_scaled_split_k_shows_as_a_zeroed_buffer_and_a_cast():
    """FP8 scales ride in the pointers a finishing split uses for its slots, so a scaled split
    adds into a zeroed fp32 output and casts it."""
    a = torch.randn(50, 256, device=DEVICE).to(torch.float8_e4m3fn)
    b = torch.randn(70, 256, device=DEVICE).to(torch.float8_e4m3fn)
    one = torch.ones(1, device=DEVICE)
    with forced_config(SMALL.with_(split_k=2)):
        c = cs.census_call(lambda: matmul(a, b, scale_mode=1, a_scale=one, b_scale=one), dry=False)
    assert c.gemms()[0].get("SPLIT_K") == 2 and not c.gemms()[0].get("SPLIT_FINISH")
    assert c.copies.get("zeros", 0) + c.copies.get("zero_", 0) + c.copies.get("fill_", 0) >= 1
    assert c.copies.get("_to_copy") == 1
    assert c.copy_bytes >= 50 * 70 * 4


def test_specialization_tells_odd_strides_from_aligned_ones():
    odd = cs._spec_of((torch.empty(4), 1, 32, 4097))
    assert odd[1:] == (("int", True, False), ("int", False, True), ("int", False, False))
    assert odd[0][2] is True


def test_dry_run_decides_as_on_a_gpu_and_runs_nothing():
    """On an sm_90 GPU a large bf16 forward runs the warp-specialized 16-bit kernel, one
    persistent program per SM: the dry census records it there (it used to show the Triton
    kernel the CPU falls back to); ``gluon=False`` shows that fallback, on TMA."""
    a, b, d = cs.inputs(Shape("s", M=4097, N=6144, K=4096), torch.bfloat16, "cpu")
    before = cs.launch.interpreter_mode()
    c = cs.census_call(lambda: cs.launch.gemm(a, b), dry=True, sms=132)
    (ws,) = c.gluon()
    assert ws.kernel == "_bf16_ws_kernel" and ws.ctas == 132 and c.gemms() == []
    assert cs.launch.interpreter_mode() is before  # restored after the block
    assert cs.launch.bf16_ws.supported_dtypes(a, b, a.dtype) is False  # and the check too
    c = cs.census_call(lambda: cs.launch.gemm(a, b), dry=True, sms=132, gluon=False)
    (g,) = c.gemms()
    assert g.get("USE_TMA") is True and not c.gluon()
    assert g.ctas <= 132 or not g.get("PERSISTENT")


def test_repeated_calls_compile_nothing_new():
    """Per-call recompiles would show as new specialization keys on a second identical call."""
    a, b, d = cs.inputs(Shape("s", M=1000, N=5120, K=1000), torch.bfloat16, "cpu")
    step = cs.linear_paths(a, b, d)["fp8_block.step"]
    once = cs.census_call(step, dry=True)
    twice = cs.census_call(lambda: (step(), step()), dry=True)
    assert len(twice.launches) == 2 * len(once.launches)
    assert twice.variants() == once.variants()


@pytest.mark.parametrize(
    "mnk", [(4097, 3000, 2000), (1000, 5120, 1000), (100, 1000, 1000)], ids=str
)
def test_fp8_step_never_takes_the_scalar_load_path(mnk):
    """The FP8 copies are written with 16-byte rows, so no GEMM of the step falls back to
    byte-wise loads whatever M, N, K are; outside the tiny bucket all three use TMA (the
    Triton kernels, which the census shows with the Gluon kernels left out)."""
    M, N, K = mnk
    a, b, d = cs.inputs(Shape("s", M=M, N=N, K=K), torch.bfloat16, "cpu")
    step = cs.linear_paths(a, b, d)["fp8_block.step"]
    c = cs.census_call(step, dry=True, gluon=False)
    assert c.quant_passes() > 0  # the FP8 path itself, whatever the dispatch table says
    assert len(c.gemms()) == 3 and c.unaligned_gemms() == 0 and not c.gluon()
    if M * N >= 128 * 128 * 16:
        assert all(g.get("USE_TMA") for g in c.gemms())


@pytest.mark.parametrize("mnk", [(4096, 6144, 4096), (4097, 6144, 4096)], ids=str)
def test_dry_census_shows_the_fp8_gemms_on_the_gluon_kernel_as_a_gpu_runs_them(mnk):
    """On an sm_90 GPU the blockwise step's three GEMMs run the warp-specialized Gluon kernel
    (the weight gradient with one B scale per column): the dry census records them there,
    not on the Triton kernel the CPU would fall back to."""
    M, N, K = mnk
    a, b, d = cs.inputs(Shape("s", M=M, N=N, K=K), torch.bfloat16, "cpu")
    c = cs.census_call(cs.linear_paths(a, b, d)["fp8_block.step"], dry=True)
    names = sorted(x.kernel for x in c.gluon())
    assert names == ["_fp8_block_ws_cols_kernel", "_fp8_block_ws_kernel", "_fp8_block_ws_kernel"]
    assert c.gemms() == []
    assert "gemm 0 (tma 0, scalar-load 0, split_k -," in cs.summary(c, 132)


def test_sixteen_bit_pointer_path_gets_full_vectors_on_strides_off_16():
    """K = 1000 (rows of 2000 bytes) on a pointer-path tile: A/B_ALIGN = 8."""
    a, b, d = cs.inputs(Shape("s", M=100, N=1000, K=1000), torch.bfloat16, "cpu")
    with forced_config(GemmConfig(64, 64, 64, num_warps=4, num_stages=3)):
        c = cs.census_call(cs.linear_paths(a, b, d)["16bit.fwd"], dry=True)
    (g,) = c.gemms()
    assert not g.get("USE_TMA") and g.get("A_ALIGN") == g.get("B_ALIGN") == 8
    assert c.unaligned_gemms() == 0


@pytest.mark.parametrize("mnk", [(1, 4096, 4096), (7, 3584, 3584), (100, 1000, 1000)], ids=str)
def test_tiny_outputs_take_one_launch_per_gemm(mnk):
    """Decode rows and small outputs are host-bound: each GEMM of the 16-bit step is one
    launch on TMA tiles, no split-K (whose zeroed buffer and cast are launches of their own)."""
    M, N, K = mnk
    a, b, d = cs.inputs(Shape("s", M=M, N=N, K=K), torch.bfloat16, "cpu")
    for path in ("16bit.fwd", "16bit.bwd"):
        c = cs.census_call(cs.linear_paths(a, b, d)[path], dry=True)
        tiny = [g for g in c.gemms() if g.get("BLOCK_M") <= 64 and g.get("BLOCK_N") <= 128]
        assert tiny and all(g.get("SPLIT_K") == 1 and g.get("USE_TMA") for g in tiny), path


@pytest.mark.parametrize(
    "mnk,shipped",
    [
        ((1000, 1000, 2000), lambda: configs.CONFIGS["bf16"]["medium"]),
        ((128, 128, 16384), lambda: configs.SPLIT_K_INSTEAD["bf16"]["long_k"]),
    ],
    ids=["m1000", "longk"],
)
def test_small_outputs_fill_at_least_half_the_sms(mnk, shipped):
    """Under-filled grids get the smaller tiles their bucket ships and split-K where it splits:
    about half of 132 SMs busy or more, on the Triton kernel (``gluon=False``: where the
    warp-specialized kernel does not run) and on whichever kernel an sm_90 GPU runs."""
    M, N, K = mnk
    a, b, d = cs.inputs(Shape("s", M=M, N=N, K=K), torch.bfloat16, "cpu")
    fwd = cs.linear_paths(a, b, d)["16bit.fwd"]
    (g,) = cs.census_call(fwd, dry=True, sms=132, gluon=False).gemms()
    cfg = shipped()
    assert (g.get("BLOCK_M"), g.get("BLOCK_N")) == (cfg.block_m, cfg.block_n)
    assert g.ctas >= 64
    (taken,) = cs.census_call(fwd, dry=True, sms=132).launches
    assert taken.ctas >= 64


def test_unaligned_16bit_gradient_is_copied_once_into_tma_rows():
    """dout [4000, 4100] bf16 (rows of 8200 bytes): one aligned copy, both GEMMs on TMA."""
    a, b, d = cs.inputs(Shape("s", M=4000, N=4100, K=4104), torch.bfloat16, "cpu")
    c = cs.census_call(cs.linear_paths(a, b, d)["16bit.bwd"], dry=True)
    assert all(g.get("USE_TMA") for g in c.gemms()) and c.unaligned_gemms() == 0
    assert c.copies == {"copy_": 1} and c.copy_bytes == 4000 * 4100 * 2


def test_decode_rows_do_not_copy_the_weight():
    """M = 33, K = 8200 bf16: the weight's elements feed only 33 outputs, no copy of it."""
    a, b, d = cs.inputs(Shape("s", M=33, N=4100, K=8200), torch.bfloat16, "cpu")
    c = cs.census_call(cs.linear_paths(a, b, d)["16bit.fwd"], dry=True)
    assert c.copy_bytes < 4100 * 8200 * 2


def test_compile_names_where_each_gluon_kernel_of_a_step_compiles(monkeypatch, capsys):
    """``--compile`` compiles the Triton variants here; a Gluon kernel of the step is named
    with the launcher whose ``compile_offline`` compiles it."""

    class Res:
        def line(self) -> str:
            return "compiled"

    monkeypatch.setattr(cs, "SHAPE_SETS", {"model": lambda: [Shape("s", M=4096, N=6144, K=4096)]})
    monkeypatch.setattr(cs, "resources_of", lambda kernel, variants: [Res() for _ in variants])
    assert cs.main(["--set", "model", "--compile"]) == 0
    out = capsys.readouterr().out
    owner = "kernel_ratchet.kernels.gemm.fp8_block_ws_launch.compile_offline"
    assert f"_fp8_block_ws_kernel: a Gluon kernel, compiled by {owner}" in out
    assert "_fp8_block_ws_cols_kernel" in out and ": compiled" in out  # the 16-bit variants
    ws16 = "kernel_ratchet.kernels.gemm.bf16_ws_launch.compile_offline"
    assert f"_bf16_ws_kernel: a Gluon kernel, compiled by {ws16}" in out  # its forward
