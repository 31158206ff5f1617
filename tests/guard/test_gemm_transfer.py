"""The dynamic transfer check on the bundled dense GEMM, through its autograd Functions.

A test-local adapter feeds ``GemmFunction`` / ``Fp8GemmFunction`` a weight that keeps its
identity and fresh activations and grad_out every step. On the H200 (``pytest -m gpu
tests/guard``) the incumbent kernels must transfer and a planted id()-keyed output cache must
not; on the CPU a two-step smoke run of the same adapter checks the plumbing.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch

from kernel_ratchet.guard.dynamic_transfer import OVERFIT, TRANSFERS, simulate_training
from kernel_ratchet.harness.adapter import SNR_BF16, SNR_E4M3, Adapter, Shape

gemm_kernel = pytest.importorskip("kernel_ratchet.kernels.gemm.launch")
gemm_fp8 = pytest.importorskip("kernel_ratchet.kernels.gemm.fp8")
gemm_adapter = pytest.importorskip("kernel_ratchet.kernels.gemm.adapter")


class LinearTraining(Adapter):
    """A Linear layer step ``out = a @ bᵀ``; forward and backward through autograd."""

    schema: ClassVar[str] = "gemm"
    has_backward: ClassVar[bool] = True

    def __init__(self, fn: Any, dtype: torch.dtype, min_snr_db: float = SNR_BF16) -> None:
        self.fn, self.dtype = fn, dtype
        self.min_snr_db = {"default": min_snr_db}  # the simulation checks a step's outputs

    def make_case(self, shape: Shape, seed: int, device: str) -> Any:
        case = gemm_adapter.make_linear_inputs(shape, seed, device, self.dtype)
        case.a.requires_grad_(True)
        case.b.requires_grad_(True)
        return case

    def forward(self, case: Any) -> torch.Tensor:
        case.state["out"] = self.fn(case.a, case.b)
        return case.state["out"]

    def backward(self, case: Any) -> Any:
        # retain_graph: a memoizing candidate hands back the same output (and graph) again
        out = case.state["out"]
        return torch.autograd.grad(out, (case.a, case.b), case.dout, retain_graph=True)

    def training_roles(self, case: Any) -> dict[str, str]:
        return {"a": "activation", "b": "weight", "dout": "grad_out"}

    def outputs(self, case: Any) -> dict[str, torch.Tensor]:
        return {"out": self.forward(case).detach()}

    def reference(self, case: Any) -> dict[str, torch.Tensor]:
        return {"out": (case.a.double() @ case.b.double().T).float()}

    def flops(self, shape: Shape) -> tuple[float, float]:
        mnk = 2.0 * shape.M * shape.N * shape.K
        return mnk, 2 * mnk


def id_cached(fn: Any) -> Any:
    """The planted W2/W3 candidate: the op's output memoized on its operands' identity."""
    cache: dict[tuple[int, int], torch.Tensor] = {}

    def wrapped(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (id(a), id(b))
        if key not in cache:
            cache[key] = fn(a, b)
        return cache[key]

    return wrapped


def fp8_blockwise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return gemm_fp8.Fp8GemmFunction.apply(a, b, gemm_fp8.Fp8Recipe("blockwise"))


def test_cpu_smoke_of_the_gemm_adapter(device) -> None:
    adapter = LinearTraining(gemm_kernel.GemmFunction.apply, torch.float16)
    shape = Shape("m32_n32_k32", M=32, N=32, K=32)
    result = simulate_training(adapter, shape, device=device, steps=2, repeats=2, min_rel_gap=9)
    assert result.verdict == TRANSFERS and result.train_ms > 0


GPU_SHAPES = [
    Shape("m4096_n4096_k4096", 4096, 4096, 4096),
    Shape("m256_n4096_k4096", 256, 4096, 4096),  # launch-bound
]


@pytest.mark.gpu
@pytest.mark.gpu_alone  # times the two idioms against each other
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: s.label)
@pytest.mark.parametrize("name", ["bf16", "fp8-blockwise"], ids=["bf16", "fp8-blockwise"])
def test_gemm_transfers_on_gpu(name: str, shape: Shape) -> None:
    fn = gemm_kernel.GemmFunction.apply if name == "bf16" else fp8_blockwise
    adapter = LinearTraining(fn, torch.bfloat16, SNR_BF16 if name == "bf16" else SNR_E4M3)
    result = simulate_training(adapter, shape, device="cuda", steps=8, repeats=7)
    print(
        f"{name} {shape.label}: bench {result.bench_ms:.4f} ms, train {result.train_ms:.4f} ms,"
        f" gap {result.gap_ms:+.4f} ± {result.noise_ms:.4f} ms -> {result.verdict}"
    )
    assert result.verdict == TRANSFERS, result


@pytest.mark.gpu
@pytest.mark.gpu_alone
def test_planted_output_cache_is_overfit_on_gpu() -> None:
    adapter = LinearTraining(id_cached(gemm_kernel.GemmFunction.apply), torch.bfloat16)
    result = simulate_training(adapter, GPU_SHAPES[0], device="cuda", steps=8, repeats=7)
    assert result.verdict == OVERFIT and result.gap_rel > 0.2, result
