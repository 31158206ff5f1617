"""The quantity probe's statistic and its refusal without a GPU (the probe itself runs on one:
``python -m kernel_ratchet.method.quantity_probe``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_ratchet.method import quantity_probe


def test_ci_half_width_shrinks_with_the_noise_and_the_rounds():
    rng = np.random.default_rng(0)
    noisy = np.exp(rng.normal(0, 0.05, 10))
    quiet = np.exp(rng.normal(0, 0.005, 10))
    many = np.exp(rng.normal(0, 0.05, 200))
    w_noisy = quantity_probe.ci_half_width(noisy, np.random.default_rng(1))
    assert 0.005 < w_noisy < 0.1
    assert quantity_probe.ci_half_width(quiet, np.random.default_rng(1)) < w_noisy / 4
    assert quantity_probe.ci_half_width(many, np.random.default_rng(1)) < w_noisy / 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only behaviour")
def test_the_probe_refuses_to_run_without_a_gpu(capsys):
    assert quantity_probe.main(["--rounds", "10"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
