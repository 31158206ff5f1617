"""A project module that starts native threads when imported (for the thread check)."""

from tests.harness.redteam_base import TinyGemm
from tests.harness.redteam_threads import grow_native_pool

grow_native_pool()


class PoolAtImport(TinyGemm):
    """The honest tiny GEMM, from a module whose import grew torch's native pool."""
