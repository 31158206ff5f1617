"""Which library operations an op's own call runs: the dynamic side of the backend audit.

The static backend audit (:mod:`kernel_ratchet.guard.backend`) reads the candidate's source;
a vendor operation reached through a name built at run time (``getattr(torch, "m" + "m")``,
``torch.ops.aten`` looked up by a string, a helper module outside ``kernel_source``) is not
in that source. :func:`counting` watches the call itself: every ATen operation that reaches
the dispatcher while it is open is seen under a ``TorchDispatchMode``, whatever spelling
called it, and the vendor-class ones (GEMMs, convolutions, attention, normalizations,
softmax, activations, FFT, linear algebra, and every operation outside ATen, whose inside
the census cannot see: :func:`is_vendor`) are counted by name.

A worker counts the op's first call in its correctness check (never a timed call) and
reports the counts; the paired A/B compares the two sides on the same shape and inputs
(:func:`added`). A Triton kernel launches no ATen operation of that class, so a candidate
that runs more of them than the incumbent hands work to the library.

Not seen: work captured earlier in a CUDA graph and replayed, a library called without
torch (ctypes, cupy), a candidate that runs another path once it sees a dispatch mode or
after its first call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

#: ATen operations (overload packet names) that run a vendor library's or torch's own
#: compute kernel: what a Triton kernel would be replaced by.
VENDOR_OPS = frozenset(
    {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "addr"}
    | {"_int_mm", "_scaled_mm", "_scaled_mm_v2", "_scaled_grouped_mm", "_grouped_mm"}
    | {"_addmm_activation", "_weight_int4pack_mm", "_weight_int8pack_mm", "_mixed_dtypes_linear"}
    | {"convolution", "_convolution", "convolution_backward", "_convolution_double_backward"}
    | {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}
    | {"native_layer_norm", "native_layer_norm_backward", "native_group_norm"}
    | {"native_group_norm_backward", "native_batch_norm", "native_batch_norm_backward"}
    | {"_native_batch_norm_legit", "_native_batch_norm_legit_no_training"}
    | {"_fused_rms_norm", "_fused_rms_norm_backward", "gelu", "gelu_backward", "silu"}
    | {"silu_backward", "relu", "embedding", "embedding_dense_backward", "_embedding_bag"}
    # what runs one of the above inside a kernel of its own, unseen by a dispatch mode
    | {"_trilinear", "bilinear", "linear", "matmul", "einsum", "tensordot", "chain_matmul"}
    | {"kron", "matrix_power", "cdist", "_cdist_forward", "_euclidean_dist", "embedding_bag"}
    | {"_slow_conv2d_forward", "_slow_conv2d_backward", "thnn_conv2d", "slow_conv3d_forward"}
    | {"slow_conv3d", "slow_conv_dilated2d", "slow_conv_dilated3d", "slow_conv_transpose2d"}
    | {
        "slow_conv_transpose3d",
        "_conv_depthwise2d",
        "conv_depthwise3d",
        "_nnpack_spatial_convolution",
    }
    | {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
    | {"_native_multi_head_attention", "_masked_softmax", "_transformer_encoder_layer_fwd"}
    | {"softmax", "log_softmax", "_safe_softmax", "layer_norm", "group_norm", "batch_norm"}
    | {"instance_norm", "rms_norm", "scaled_dot_product_attention", "_sparse_mm", "hspmm"}
    | {"_sparse_addmm", "sspaddmm", "_sparse_sparse_matmul", "_sparse_semi_structured_linear"}
    | {"conv_tbc", "conv_tbc_backward", "convolution_overrideable", "_convolution_mode"}
    | {"_cdist_backward", "pdist", "_pdist_forward", "_pdist_backward", "_batch_norm_impl_index"}
    | {"_native_batch_norm_legit_functional", "_batch_norm_with_update", "_weight_norm"}
)
#: Name prefixes of whole families: attention, cuDNN, MIOpen, cuSPARSELt, oneDNN, FBGEMM,
#: cuFFT, cuSOLVER/MAGMA.
VENDOR_PREFIXES = (
    "_scaled_dot_product",
    "_flash_attention",
    "_efficient_attention",
    "_cudnn",
    "cudnn_",
    "miopen_",
    "_cslt",
    "mkldnn_",
    "_mkldnn",
    "fbgemm_",
    "_fbgemm",
    "_fft_",
    "fft_",
    "linalg_",
    "_linalg_",
    "quantized_",
)
#: Namespaces judged by the operation's name; an operation of any other namespace (a custom
#: operation registered with ``torch.library``, ``quantized::``, ``fbgemm::``) runs code the
#: census cannot see into, and counts as library work (``profiler::``: record_function).
JUDGED_BY_NAME = frozenset({"aten", "prims"})
NOT_WORK = frozenset({"profiler"})


def is_vendor(name: str) -> bool:
    """Whether the operation ``name`` (``mm``, ``aten::mm``, ``aten.mm``, ``mylib::fast``) is
    of the vendor class; in-place spellings (``relu_``) count as their operation."""
    space, _, leaf = name.replace("::", ".").rpartition(".")
    space = space.partition(".")[0] or "aten"
    if space in NOT_WORK:
        return False
    if space not in JUDGED_BY_NAME:
        return True
    leaf = leaf[:-1] if leaf.endswith("_") and not leaf.endswith("__") else leaf
    return leaf in VENDOR_OPS or leaf.startswith(VENDOR_PREFIXES)


def _mode_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Census(TorchDispatchMode):
        def __init__(self, counts: Counter[str]) -> None:
            super().__init__()
            self.counts = counts

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # torch wraps a mode's __torch_dispatch__ in torch._dynamo.disable by default,
            # importing Dynamo at the first operation (1-3 s of CPU in every worker); this
            # mode only counts and forwards, and counts the same ops of a compiled function
            return False

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            packet = func._overloadpacket
            name = f"{func.namespace}::{packet.__name__}"
            if is_vendor(name):
                self.counts[name] += 1
            return func(*args, **(kwargs or {}))

    return _Census


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """The vendor-class ATen operations run while the block runs, by name (filled as they
    run; ``aten::mm``: 2)."""
    counts: Counter[str] = Counter()
    with _mode_class()(counts):
        yield counts


def added(incumbent: Mapping[str, int], candidate: Mapping[str, int]) -> dict[str, int]:
    """The vendor-class operations the candidate runs more often than the incumbent did on
    the same call: ``{name: how many more}``."""
    return {
        name: n - int(incumbent.get(name, 0))
        for name, n in sorted(candidate.items())
        if is_vendor(name) and n > int(incumbent.get(name, 0))
    }


def describe(extra: Mapping[str, int], label: str) -> str:
    """One sentence for a round record: which operations the candidate's call adds."""
    ops = ", ".join(f"{name} x{n}" for name, n in extra.items())
    return (
        f"on {label}, the candidate's call runs library operations the incumbent's does not "
        f"({ops}; seen at run time by the ATen dispatcher): it hands the work to the vendor "
        "library"
    )
