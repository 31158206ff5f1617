"""Full benchmark of the tiny GEMM: ``python -m tiny_gemm.bench [-o out.csv]``.

Times every shape of the target set with torch.utils.benchmark.Timer and writes the frozen
GEMM schema. On the CPU the kernel runs in the Triton interpreter: the numbers rank configs
for a rehearsal only, they say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import os

import torch  # noqa: E402

if not torch.cuda.is_available():  # CPU: Triton kernels run in the interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")
import torch.utils.benchmark as tb  # noqa: E402

from kernel_ratchet.harness.correctness import snr_db  # noqa: E402
from kernel_ratchet.harness.csv_schema import SCHEMAS, write_csv  # noqa: E402
from tiny_gemm.kernel import matmul_nt  # noqa: E402
from tiny_gemm.reference import matmul_nt_ref  # noqa: E402
from tiny_gemm.shapes import TINY  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-o", "--output", default="tiny_gemm_bench.csv")
    args = p.parse_args()
    rows = []
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for s in TINY:
        a = torch.randn(s.M, s.K, device=device)
        b = torch.randn(s.N, s.K, device=device)
        snr = snr_db(matmul_nt(a, b), matmul_nt_ref(a, b))
        env = {"matmul_nt": matmul_nt, "a": a, "b": b}
        m = tb.Timer("matmul_nt(a, b)", globals=env).blocked_autorange(min_run_time=0.5)
        ms = m.median * 1e3
        tflops = 2 * s.M * s.N * s.K / (ms * 1e-3) / 1e12
        std = tflops * (m.iqr / m.median) / 1.349
        check = "PASS" if snr >= 80 else "FAIL"
        rows.append(
            [s.label, 1, s.M, s.N, s.K, check, tflops, std, None, None, ms, None, snr, None, None]
        )
        print(f"{s.label}: {ms:.3f} ms {check} snr={snr:.1f} dB")
    write_csv(args.output, SCHEMAS["gemm"], rows)


if __name__ == "__main__":
    main()
