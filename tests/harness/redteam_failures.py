"""Red-team candidates that fail without faking a time: a wrong or NaN result, a non-tensor,
an input written, a hang, a crash, running out of memory; and an honest one that prints
on stdout. Imported through :mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import os
import time

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


class LowPrecision(TinyGemm):
    """Computes in fp16 where fp32 accuracy is required (SNR far below 80 dB)."""

    def forward(self, case: Case) -> torch.Tensor:
        return (case.a.half().float() @ case.b.half().float().T).half().float()


class NonTensor(TinyGemm):
    """Returns a Python list instead of a tensor."""

    def forward(self, case: Case) -> torch.Tensor:
        return matmul_nt(case.a, case.b).tolist()  # type: ignore[return-value]


class ModifiesInputs(TinyGemm):
    """Scales its input in place (e.g. to stash state in it)."""

    def forward(self, case: Case) -> torch.Tensor:
        out = matmul_nt(case.a, case.b)
        case.a.mul_(1.0 + 1e-3)
        return out


class NanOutput(TinyGemm):
    """Produces NaN in one element."""

    def forward(self, case: Case) -> torch.Tensor:
        out = matmul_nt(case.a, case.b)
        out[0, 0] = float("nan")
        return out


class Hangs(TinyGemm):
    """Sleeps far past any time limit."""

    def forward(self, case: Case) -> torch.Tensor:
        time.sleep(600)
        return matmul_nt(case.a, case.b)


class Aborts(TinyGemm):
    """Calls ``os.abort()`` (SIGABRT)."""

    def forward(self, case: Case) -> torch.Tensor:
        os.abort()


class Segfaults(TinyGemm):
    """Dereferences a null pointer (SIGSEGV)."""

    def forward(self, case: Case) -> torch.Tensor:
        import ctypes

        ctypes.string_at(0)
        return matmul_nt(case.a, case.b)


class RaisesOom(TinyGemm):
    """Raises the error an allocation past device memory raises."""

    def forward(self, case: Case) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")


class OomOnce(TinyGemm):
    """Runs out of device memory on its first call while the flag file ``KR_TEST_OOM_FLAG``
    names does not exist (it then makes it), honest after: a request that lacked room once."""

    def forward(self, case: Case) -> torch.Tensor:
        flag = os.environ.get("KR_TEST_OOM_FLAG", "")
        if flag and not os.path.exists(flag):
            open(flag, "w").close()  # noqa: SIM115 -- a marker, closed at once
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
        return matmul_nt(case.a, case.b)


class PrintsToStdout(TinyGemm):
    """Honest, but chatty on stdout (must not corrupt the protocol channel)."""

    def forward(self, case: Case) -> torch.Tensor:
        print("debug: forward called", flush=True)
        os.write(1, b"raw fd-1 write\n")
        return matmul_nt(case.a, case.b)
