"""An op runs the files its kernel files import: a change to such a helper is known to reach
it (:mod:`kernel_ratchet.profile.imports`) and named among the ops sharing the round's files."""

from __future__ import annotations

from pathlib import Path

from kernel_ratchet.campaign.rounds.shared import sharing_ops
from kernel_ratchet.profile.imports import imported_files
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import KERNEL, with_ops


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_imports_are_followed_absolute_relative_and_through_other_files(tmp_path):
    _tree(
        tmp_path,
        {
            "pack/__init__.py": "",
            "pack/dense/__init__.py": "",
            "pack/dense/pipeline.py": "def issue(): pass\n",
            "pack/dense/tiles.py": "import math\n",
            "pack/dense/unused.py": "",
            "pack/grouped/__init__.py": "",
            "pack/grouped/kernel.py": "from ..dense.pipeline import issue\nfrom . import helpers\n",
            "pack/grouped/helpers.py": "from pack.dense import tiles\n",
            "pack/grouped/broken.py": "def (:\n",
        },
    )
    found = imported_files(tmp_path, ["pack/grouped/kernel.py", "pack/grouped/broken.py"])
    assert {"pack/dense/pipeline.py", "pack/grouped/helpers.py", "pack/dense/tiles.py"} <= found
    assert "pack/__init__.py" in found and "pack/dense/__init__.py" in found
    assert "pack/dense/unused.py" not in found and "pack/grouped/kernel.py" not in found
    assert imported_files(tmp_path, ["missing.py", "notes.md"]) == set()


def test_an_op_importing_a_changed_file_shares_it(project):
    helper = Path(KERNEL).parent / "importer.py"
    module = KERNEL.removesuffix(".py").replace("/", ".")
    (project / helper).write_text(f"from {module} import *\n")
    (project / "lone.py").write_text("import os\n")
    profile = with_ops(
        load_profile(project),
        importer=([helper.as_posix()], "pytest a"),
        lone=(["lone.py"], "pytest b"),
    )
    assert sharing_ops(profile, "tiny_gemm", [KERNEL]) == {"importer": [KERNEL]}
