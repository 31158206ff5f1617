"""Small ops for the described-adapter tests: an RMS norm in plain torch (the "kernel") and
its reference, and a kernel that returns a wrong result."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The op under test: y = x / rms(x) * weight, in the input's dtype."""
    rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return (x.float() * rstd * weight.float()).to(x.dtype)


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Reference: the same formula written independently."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def rms_norm_wrong(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """A wrong kernel: forgets the weight."""
    return rms_norm(x, torch.ones_like(weight), eps)


def rms_norm_with_extras(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """The op with the extras it returns only when asked (a loss's ``(loss, None, None)``)."""
    return rms_norm(x, weight, eps), None, None


def rms_norm_odd_rows_only(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """A kernel that raises on an even number of rows, as a launch with a bad grid would."""
    if x.shape[0] % 2 == 0:
        raise RuntimeError("invalid grid: even rows")
    return rms_norm(x, weight, eps)


SEEN: list[tuple[int, int]] = []  # (id(x), id(weight)) of every call


def rms_norm_seen(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The op, recording which tensor objects each call was handed."""
    SEEN.append((id(x), id(weight)))
    return rms_norm(x, weight, eps)


def rms_norm_and_argmax(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """The op and the index of each row's largest output: an integer output, no gradient."""
    y = rms_norm(x, weight, eps)
    return y, y.argmax(-1)


def rms_norm_and_argmax_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    y = rms_norm_ref(x, weight, eps)
    return y, y.argmax(-1)


def rms_norm_positional(x: torch.Tensor, weight: torch.Tensor, eps: float, /) -> torch.Tensor:
    """The op with its epsilon positional only, as autograd Functions take constants
    (``Function.apply(x, w, eps)``)."""
    assert isinstance(eps, float) and eps < 1e-3, eps
    return rms_norm(x, weight, eps)


def rms_norm_no_graph(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The op as a kernel launched directly: right values, no autograd graph."""
    with torch.no_grad():
        return rms_norm(x, weight, eps)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """A gated activation: [M, 2N] -> [M, N]."""
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def silu_and_mul_ref(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    gate, up = x[..., :n].double(), x[..., n:].double()
    return (gate * torch.sigmoid(gate) * up).to(x.dtype)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits, targets)


def cross_entropy_first_128(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Wrong wherever a target is 128 or more (an index kept in 7 bits)."""
    return torch.nn.functional.cross_entropy(logits, targets % 128)


def rms_norm_bf16_out(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Right to bf16's precision whatever the inputs' dtype: wrong for an fp32 op."""
    return rms_norm(x, weight, eps).to(torch.bfloat16)


def cross_entropy_clamped(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Wrong wherever a target is the ignore_index: it counts as class 0."""
    return torch.nn.functional.cross_entropy(logits, targets.clamp(min=0))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """Reference: the tanh GELU."""
    return torch.nn.functional.gelu(x, approximate="tanh")


def gelu_tanh_by_exp(x: torch.Tensor) -> torch.Tensor:
    """A kernel right on randn inputs whose tanh, written with exp, overflows past |u| ~ 44:
    inf / inf is NaN."""
    u = 0.7978845608 * (x + 0.044715 * x**3)
    e = torch.exp(2 * u)
    return 0.5 * x * (1 + (e - 1) / (e + 1))


def masked_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reference: a softmax over the unmasked entries (``mask`` True is masked); a fully
    masked row is 0."""
    p = torch.softmax(x.masked_fill(mask, -torch.inf), dim=-1)
    return torch.nan_to_num(p, nan=0.0)


def masked_softmax_unguarded(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A kernel with no guard for a fully masked row: exp(-inf - -inf) is NaN there."""
    z = x.masked_fill(mask, -torch.inf)
    e = torch.exp(z - z.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def rms_norm_eps_outside(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """A kernel that adds eps after the rsqrt: right to 1e-6 on randn rows, NaN on a row of
    zeros (0 * inf)."""
    rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True)) + eps
    return (x.float() * rstd * weight.float()).to(x.dtype)


def rms_norm_dense_rows(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """A kernel that takes the row stride to be N: right on contiguous inputs, reads the wrong
    memory of a slice of a wider buffer."""
    dense = x.as_strided(x.shape, (x.shape[-1], 1))
    return rms_norm(dense, weight, eps)


def masked_logsumexp(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reference: log-sum-exp over the unmasked entries; -inf on a fully masked row."""
    return torch.logsumexp(x.masked_fill(mask, -torch.inf), dim=-1)


def masked_logsumexp_shifted(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A kernel that shifts by the row max and keeps -inf for a fully masked row."""
    z = x.masked_fill(mask, -torch.inf)
    top = z.max(-1).values
    safe = torch.where(torch.isinf(top), 0.0, top)
    return torch.log(torch.exp(z - safe[:, None]).sum(-1)) + safe


def rms_norm_skips_last_row(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """A kernel whose grid misses the last row: one row in 16384 costs the whole tensor
    0.3 dB."""
    y = rms_norm(x, weight, eps)
    y[-1] = 0
    return y


def quantize_rows(x: torch.Tensor) -> torch.Tensor:
    """Row-wise e4m3 quantization, returned dequantized to fp8's grid in fp8 itself."""
    scale = x.float().abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448.0
    return (x.float() / scale).to(torch.float8_e4m3fn)


def quantize_rows_ref(x: torch.Tensor) -> torch.Tensor:
    scale = x.abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448.0
    return x / scale


def quantize_rows_fp8_ref(x: torch.Tensor) -> torch.Tensor:
    """The same recipe as :func:`quantize_rows`, in fp8 itself: a reference that quantizes."""
    return quantize_rows(x)


def quantize_rows_headroom(x: torch.Tensor) -> torch.Tensor:
    """Every value 3% low (a scale off by 3%): about 26 dB against the same recipe."""
    scale = x.float().abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448.0
    return (x.float() / scale * 0.97).to(torch.float8_e4m3fn)


def topk_ref(x: torch.Tensor, k: int = 4):
    """The values and indices of each row's k largest entries."""
    v, i = torch.topk(x, k, dim=-1)
    return v, i


def topk_last_tie(x: torch.Tensor, k: int = 4):
    """An honest top-k that breaks ties toward the last index (the reference: the first)."""
    v, i = torch.topk(x.flip(-1), k, dim=-1)
    return v, x.shape[-1] - 1 - i


def topk_second_best(x: torch.Tensor, k: int = 4):
    """A wrong top-k: the k entries after the largest."""
    v, i = torch.topk(x, k + 1, dim=-1)
    return v[..., :k], i[..., 1:]


def topk_repeats_first(x: torch.Tensor, k: int = 4):
    """A wrong top-k: the largest entry k times (right values only where a row ties)."""
    v, i = torch.topk(x, k, dim=-1)
    return v, i[..., :1].expand_as(i).contiguous()


def argmax_last_tie(x: torch.Tensor):
    """An honest argmax that breaks ties toward the last index."""
    return x.shape[-1] - 1 - x.flip(-1).argmax(-1)


def argmax_ref(x: torch.Tensor):
    return x.argmax(-1)


def argmax_past_the_end(x: torch.Tensor):
    """A wrong argmax: one past the last column on every row."""
    return torch.full(x.shape[:-1], x.shape[-1], dtype=torch.int64)


def rms_norm_dict(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """The op returning its outputs by name, in another order than declared."""
    return {"rstd": torch.rsqrt(x.float().pow(2).mean(-1) + eps), "y": rms_norm(x, weight, eps)}


def rms_norm_dict_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    return {"y": rms_norm_ref(x, weight, eps), "rstd": torch.rsqrt((x * x).mean(-1) + eps)}


def rms_norm_and_count(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """The op with a Python int among its returned values."""
    return rms_norm(x, weight, eps), x.shape[0]


def group_scale(x: torch.Tensor, group_size: int = 32) -> torch.Tensor:
    """Each row's groups of ``group_size`` columns divided by their absolute maximum."""
    assert x.shape[-1] % group_size == 0, (x.shape, group_size)
    g = x.float().unflatten(-1, (-1, group_size))
    return (g / g.abs().amax(-1, keepdim=True).clamp_min(1e-6)).flatten(-2).to(x.dtype)


def group_scale_ref(x: torch.Tensor, group_size: int = 32) -> torch.Tensor:
    g = x.unflatten(-1, (x.shape[-1] // group_size, group_size))
    return (g / g.abs().amax(-1, keepdim=True).clamp_min(1e-6)).flatten(-2)


def axpy_(y: torch.Tensor, x: torch.Tensor, a: float = 0.5) -> None:
    """y += a * x in place, returning nothing (an optimizer-style update)."""
    y.add_(x, alpha=a)


def axpy_ref(y: torch.Tensor, x: torch.Tensor, a: float = 0.5) -> torch.Tensor:
    return y + a * x
