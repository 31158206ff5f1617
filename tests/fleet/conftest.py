"""The campaign tests' baselined example project, shared with them (built once a session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.campaign.conftest import accepted_project, project, session_baseline  # noqa: F401


@pytest.fixture(scope="session")
def baselined(tmp_path_factory) -> Path:
    return session_baseline(tmp_path_factory)
