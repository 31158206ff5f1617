"""Input digests: blake2b on the CPU, the keyed device hash for GPU tensors (logic checked here
on CPU tensors; the GPU path is exercised by the GPU red-team tests)."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.digest import _weights, device_digest, tensor_digest


def _tensor(numel: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(numel)
    return torch.randn(numel, generator=g).to(dtype)


@pytest.mark.parametrize("numel", [1, 3, 1000, 4099])  # byte counts that need padding too
def test_equal_content_equal_digest_and_any_flipped_bit_changes_it(numel):
    x = _tensor(numel, torch.bfloat16)
    d = device_digest(x)
    assert device_digest(x.clone()) == d
    raw = x.view(torch.uint8)
    for pos in {0, raw.numel() // 2, raw.numel() - 1}:
        for bit in (0, 7):
            y = x.clone()
            y.view(torch.uint8)[pos] ^= 1 << bit
            assert device_digest(y) != d, (pos, bit)


def test_swapping_two_words_changes_the_digest():
    x = _tensor(64, torch.float64)
    y = x.clone()
    y[[3, 40]] = y[[40, 3]]
    assert not torch.equal(x, y) and device_digest(y) != device_digest(x)


def test_another_key_gives_another_digest_and_multipliers_are_odd():
    x = _tensor(512)
    assert device_digest(x, keys=(1, 2)) != device_digest(x, keys=(3, 4))
    w = _weights(0, 10_000, 12345, torch.device("cpu"))
    assert bool((w & 1).all()) and w.unique().numel() == w.numel()
    assert bool((w < 0).any()) and bool((w > 0).any())  # all 64 bits are used


def test_chunks_cover_every_word_and_chunks_are_told_apart(monkeypatch):
    from kernel_ratchet.harness import digest

    monkeypatch.setattr(digest, "_DIGEST_CHUNK", 7)  # 1000 words: 143 chunks, a short last
    x = _tensor(1000, torch.float64)
    d = device_digest(x)
    assert device_digest(x.clone()) == d
    for pos in (0, 6, 7, 500, 994, 999):
        y = x.clone()
        y[pos] += 1.0
        assert device_digest(y) != d, pos
    # the same position in two chunks: equal position multipliers, different chunk factors
    y = x.clone()
    y[[3, 10]] = y[[10, 3]]
    assert device_digest(y) != d
    assert digest._chunk_factor(0, 5) != digest._chunk_factor(1, 5)
    assert digest._chunk_factor(3, 5) & 1 == 1


def test_tensor_digest_covers_layout_and_dtype():
    x = _tensor(12).reshape(3, 4)
    assert tensor_digest(x) == tensor_digest(x.clone())
    assert tensor_digest(x) != tensor_digest(x.reshape(4, 3))
    assert tensor_digest(x) != tensor_digest(x.view(torch.int32))
    assert tensor_digest(torch.empty(0)) == tensor_digest(torch.empty(0))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_tensors_are_hashed_on_the_device_and_changes_are_seen():
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    d = tensor_digest(x)
    assert ":" in d and tensor_digest(x) == d
    x[4095, 4095] += 1.0
    assert tensor_digest(x) != d
