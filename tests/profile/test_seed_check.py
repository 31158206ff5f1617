"""The check that an op's inputs follow their seed."""

from __future__ import annotations

import textwrap

from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.seed_check import seeded_inputs

CASE = """
import torch
from kernel_ratchet.harness.adapter import Adapter


class GemmAdapter(Adapter):
    schema = "gemm"

    def make_case(self, shape, seed, device):
        {draw}
        return {{"a": a}}

    def forward(self, case):
        return case["a"]

    def outputs(self, case):
        return {{"out": case["a"]}}

    def reference(self, case):
        return {{"out": case["a"]}}

    def flops(self, shape):
        return (2.0 * shape.M * shape.N * shape.K, 0.0)
"""


def _item(tiny_project, draw: str):
    p = tiny_project()
    (p.root / p.pkg / "adapter.py").write_text(textwrap.dedent(CASE.format(draw=draw)))
    prof = load_profile(p.write())
    return seeded_inputs(prof, prof.op("gemm_bf16"))


def test_a_seeded_make_case_passes(tiny_project):
    item = _item(
        tiny_project, "a = torch.randn(4, 4, generator=torch.Generator().manual_seed(seed))"
    )
    assert item.ok and not item.warning, item


def test_the_global_rng_fails_and_an_ignored_seed_is_a_note(tiny_project):
    item = _item(tiny_project, "a = torch.randn(4, 4)")
    assert not item.ok and "different inputs for the same seed" in item.detail
    assert "torch.Generator" in item.fix
    item = _item(tiny_project, "a = torch.ones(4, 4)")
    assert item.ok and item.warning and "ignores its seed" in item.detail
