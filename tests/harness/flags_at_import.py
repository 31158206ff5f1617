"""An honest project that allows TF32 as it is imported (a common line in training code), for
``test_redteam.py``; holds no tests itself."""

from __future__ import annotations

import torch

from tests.harness.redteam_base import TinyGemm

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")

__all__ = ["TinyGemm"]
