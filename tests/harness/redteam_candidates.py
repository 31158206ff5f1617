"""Cheating (and failing) candidates for the red-team suite, built around the tiny example GEMM.

Imported inside worker processes as ``tests.harness.redteam_candidates:<Class>`` with the
repository root as ``source_root``; holds no tests itself. Each class is a small subclass of the
honest :class:`tiny_gemm.adapter.TinyGemm` (``TinyGemm`` here too) that fakes a result or a time
in one specific way; each module below holds the candidates of one kind.
"""

from tests.harness.redteam_base import *  # noqa: F403
from tests.harness.redteam_caches import *  # noqa: F403
from tests.harness.redteam_channels import *  # noqa: F403
from tests.harness.redteam_deferred import *  # noqa: F403
from tests.harness.redteam_failures import *  # noqa: F403
from tests.harness.redteam_gpu_only import *  # noqa: F403
from tests.harness.redteam_patches import *  # noqa: F403
from tests.harness.redteam_reference import *  # noqa: F403
from tests.harness.redteam_threads import *  # noqa: F403
from tests.harness.redteam_timed_calls import *  # noqa: F403
