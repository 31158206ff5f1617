"""A project module that starts native threads when imported (for the thread check)."""

from tests.harness.test_redteam_candidates import TinyGemm, grow_native_pool

grow_native_pool()


class PoolAtImport(TinyGemm):
    """The honest tiny GEMM, from a module whose import grew torch's native pool."""
