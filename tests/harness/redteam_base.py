"""The honest tiny GEMM of the example project, which every red-team candidate subclasses
(``redteam_*.py``) to fake a result or a time in one specific way."""

from __future__ import annotations

import sys
from pathlib import Path

_EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm")
if _EXAMPLE not in sys.path:
    sys.path.insert(0, _EXAMPLE)

from tiny_gemm.adapter import Case, TinyGemm  # noqa: E402
from tiny_gemm.kernel import matmul_nt  # noqa: E402

__all__ = ["Case", "TinyGemm", "matmul_nt"]
