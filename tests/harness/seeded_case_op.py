"""An adapter whose case keeps its seed, a plain value that differs from seed to seed: the
fresh values of a timed sample cannot be copied into its tensors (a rebind). Its forward writes
the sum of the input it was called on to the file named by ``KR_SEEN``."""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from kernel_ratchet.harness.adapter import Adapter


class SeededCase(Adapter):
    schema = "memory"
    has_backward = False

    def make_case(self, shape, seed, device):
        g = torch.Generator(device=device).manual_seed(seed)
        return SimpleNamespace(seed=seed, x=torch.randn(shape.M, shape.N, generator=g))

    def forward(self, case):
        with open(os.environ["KR_SEEN"], "a") as f:
            f.write(f"{float(case.x.sum()):.6f}\n")
        return case.x * 2

    def outputs(self, case):
        return {"y": self.forward(case)}

    def reference(self, case):
        return {"y": case.x.double() * 2}

    def flops(self, shape):
        return (0.0, 0.0)

    def bytes_moved(self, shape):
        return (8.0 * shape.M * shape.N, 0.0)
