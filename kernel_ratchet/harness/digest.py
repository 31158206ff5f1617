"""Keyed content hashes of tensors, computed where the tensor lives.

The worker's anti-cheat hashes every input tensor before and after the candidate runs
(:func:`kernel_ratchet.harness.anticheat.snapshot_inputs`). A CPU tensor is hashed with blake2b;
a GPU tensor on the GPU with a keyed hash (:func:`device_digest`): a host copy plus blake2b of a
large GEMM's inputs costs about a second per check on an H200, the device hash one small host
transfer.
"""

from __future__ import annotations

import functools
import hashlib
import secrets

import torch

#: Secret per process: the multipliers of :func:`device_digest` derive from it, so a candidate
#: cannot prepare a change of its inputs that keeps the digest.
_DIGEST_KEYS = (secrets.randbits(62), secrets.randbits(62))
#: 64-bit words per chunk. The position multipliers of one chunk are computed once per key and
#: device and kept (2 x 32 MB): a digest is then one multiply and one sum per chunk and key.
_DIGEST_CHUNK = 1 << 22
_MIX = (-7046029254386353131, -4658895280553007687, -7723592293110705685)  # splitmix64, signed
_CHUNK_SALT = 0x5DEECE66D  # chunk multipliers come from another stream than word positions
_BASE: dict[tuple[str, int, int], torch.Tensor] = {}


def _weights(start: int, n: int, key: int, device: torch.device) -> torch.Tensor:
    """Odd pseudo-random int64 multipliers for word positions ``start .. start+n`` (splitmix64
    finaliser over position + key; int64 arithmetic wraps)."""
    z = torch.arange(start, start + n, dtype=torch.int64, device=device) + key
    z = z * _MIX[0]
    z = (z ^ _shr(z, 30)) * _MIX[1]
    z = (z ^ _shr(z, 27)) * _MIX[2]
    return (z ^ _shr(z, 31)) | 1


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 words (torch shifts signed values arithmetically)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _position_weights(key: int, n: int, device: torch.device) -> torch.Tensor:
    """The multipliers of the first ``n`` word positions of a chunk (cached per key, device
    and chunk size)."""
    ck = (str(device), key, _DIGEST_CHUNK)
    base = _BASE.get(ck)
    if base is None:
        base = _BASE[ck] = _weights(0, _DIGEST_CHUNK, key, device)
    return base[:n]


@functools.lru_cache(maxsize=4096)
def _chunk_factor(c: int, key: int) -> int:
    """Odd signed 64-bit multiplier of chunk ``c`` (the same finaliser, another key stream)."""
    return int(_weights(c, 1, key ^ _CHUNK_SALT, torch.device("cpu"))[0])


def device_digest(t: torch.Tensor, keys: tuple[int, ...] = _DIGEST_KEYS) -> str:
    """Keyed hash of a tensor's bytes computed where the tensor lives: per key, the wrapping
    64-bit sum of word_i * m_i, where word i at position p of chunk c has the multiplier
    ``m_i = w_key(p) * f_key(c)``: both factors odd and pseudo-random, so every multiplier is
    odd (invertible mod 2^64: any change of a single word changes every sum) and two words'
    multipliers differ (a swap changes it too). One small host transfer per call."""
    raw = t.detach().contiguous().view(-1).view(torch.uint8)
    pad = (-raw.numel()) % 8
    if pad:
        raw = torch.cat([raw, raw.new_zeros(pad)])
    words = raw.view(torch.int64)
    sums = torch.zeros(len(keys), dtype=torch.int64, device=words.device)
    for c, i in enumerate(range(0, words.numel(), _DIGEST_CHUNK)):
        w = words[i : i + _DIGEST_CHUNK]
        for j, key in enumerate(keys):
            part = torch.sum(w * _position_weights(key, w.numel(), w.device))
            sums[j] += part * _chunk_factor(c, key)
    return "-".join(f"{v & (2**64 - 1):016x}" for v in sums.tolist()) + f"/{raw.numel()}"


def tensor_digest(t: torch.Tensor) -> str:
    """Content hash of a tensor, its shape, dtype and strides (blake2b of the bytes for a CPU
    tensor, :func:`device_digest` on the device for any other)."""
    t = t.detach()
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((tuple(t.shape), str(t.dtype), tuple(t.stride()))).encode())
    if t.numel() and t.device.type != "cpu":
        return h.hexdigest() + ":" + device_digest(t)
    raw = t.contiguous().view(-1).view(torch.uint8) if t.numel() else t.new_empty(0)
    h.update(raw.cpu().numpy().tobytes())
    return h.hexdigest()
