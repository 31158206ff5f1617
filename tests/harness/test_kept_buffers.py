"""A kernel that returns a kept output buffer it rewrites on every call is timed (one call per
sample, flagged) instead of refused as batch-and-skip; a stale kept buffer is still refused,
and an output written into an input is refused as "input modified"."""

from __future__ import annotations

from pathlib import Path

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.timed_checks import KEPT_BUFFER_FLAG
from kernel_ratchet.harness.worker import Worker
from tests.redteam.expect import SEED, SHAPE, cpu_spec, expect_rejected, explain

ADAPTERS = "tests.harness.kept_buffer_adapters"
SQUARE = Shape("m16_n16_k16", M=16, N=16, K=16)


def test_an_honest_kept_buffer_is_checked_and_timed_one_call_per_sample(tmp_path: Path) -> None:
    with Worker(cpu_spec(f"{ADAPTERS}:KeptBuffer"), tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)
        t = w.time(SHAPE, SEED + 1, "fwd")
        assert t.ok, explain(t)
        assert KEPT_BUFFER_FLAG in t.payload["flags"]
        assert t.payload["spot_checks"] >= 1 and t.payload["median_ms"] > 0


def test_a_stale_kept_buffer_is_refused(tmp_path: Path) -> None:
    with Worker(cpu_spec(f"{ADAPTERS}:StaleKeptBuffer"), tmp_path / "w.log") as w:
        expect_rejected(w.check(SHAPE, SEED), ("cheat", "nan"), ("did not follow", "NaN"))


def test_an_output_written_into_an_input_is_refused_as_input_modified(tmp_path: Path) -> None:
    with Worker(cpu_spec(f"{ADAPTERS}:IntoInput"), tmp_path / "w.log") as w:
        expect_rejected(w.time(SQUARE, SEED, "fwd"), "cheat", "input modified")


def test_the_poison_of_a_custom_functions_view_output_shows_and_does_not_crash() -> None:
    """A graph replay returns the same output every sample, and it is poisoned in between. An
    output that is the autograd view of a custom Function (as fla's norms return) used to
    crash the backward timed next ("a view ... modified inplace"); the poison writes its .data."""
    import torch

    from kernel_ratchet.harness import anticheat as ac
    from tests.harness.kept_buffer_adapters import ViewOut

    a = torch.randn(8, 4, requires_grad=True)
    out = ViewOut.apply(a, torch.randn(6, 4))
    ac.poison(ac.output_tensors(out, "forward()"))
    assert ac.nonfinite(ac.output_tensors(out, "forward()")) == ["0"]
    assert out.requires_grad and out.detach().data_ptr() == out.data_ptr()
    # the backward timed next starts from this output (a graph's static one): the poison must
    # not count as an in-place write for autograd ("a view ... modified inplace" otherwise)
    (grad,) = torch.autograd.grad(out, a, torch.ones_like(out), allow_unused=True)
    assert grad is None
