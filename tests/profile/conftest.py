"""Tiny throw-away target projects for the profile tests."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

_counter = itertools.count()

ADAPTER_SRC = """
from kernel_ratchet.harness.adapter import Adapter


class GemmAdapter(Adapter):
    schema = "{schema}"

    def make_case(self, shape, seed, device):
        return None

    def forward(self, case):
        return None

    def outputs(self, case):
        return {{}}

    def reference(self, case):
        return {{}}

    def flops(self, shape):
        return (2.0 * shape.M * shape.N * shape.K, 0.0)
"""

SHAPES_SRC = """
from kernel_ratchet.harness.adapter import Shape

dense = [Shape("m128", 128, 128, 128), Shape("m4096", 4096, 4096, 4096)]
empty = []
"""


def base_profile(pkg: str) -> dict:
    """A valid profile dict for package ``pkg`` with one op ``gemm_bf16``."""
    return {
        "project": "tiny",
        "package": pkg,
        "install": "pip install -e .",
        "full_test": "pytest tests -q",
        "campaign_root": ".ratchet/campaigns",
        "tips_root": "ratchet-tips",
        "ops": {
            "gemm_bf16": {
                "kernel_source": [f"{pkg}/kernel.py"],
                "backend": "TRITON",
                "lang": "triton",
                "campaign_type": "compute_fwd",
                "test": "pytest tests -q",
                "benchmark": f"python -m {pkg}.bench",
                "adapter": f"{pkg}.adapter:GemmAdapter",
                "shapes": f"{pkg}.shapes:dense",
            }
        },
    }


def dump_yaml(data) -> str:
    """``yaml.safe_dump`` (keys in order) through libyaml when PyYAML has it: the same text,
    3x faster on the hostile tests' profiles of 100,000 items."""
    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


class TinyProject:
    """A project dir with a unique package (so in-process imports never collide)."""

    def __init__(self, root: Path, schema: str = "gemm") -> None:
        self.root = root
        self.pkg = f"kr_tiny_{next(_counter)}_{abs(hash(str(root))) % 10**8}"
        pkg_dir = root / self.pkg
        pkg_dir.mkdir(parents=True)
        (pkg_dir / "__init__.py").write_text("")
        (pkg_dir / "kernel.py").write_text("# the kernel\n")
        (pkg_dir / "adapter.py").write_text(textwrap.dedent(ADAPTER_SRC.format(schema=schema)))
        (pkg_dir / "shapes.py").write_text(textwrap.dedent(SHAPES_SRC))
        (root / "tests").mkdir(exist_ok=True)  # what the op's focused test names
        (root / "tests" / "test_kernel.py").write_text("def test_kernel():\n    pass\n")
        self.data = base_profile(self.pkg)

    @property
    def op(self) -> dict:
        return self.data["ops"]["gemm_bf16"]

    def write(self, data: dict | None = None) -> Path:
        path = self.root / "ratchet.yaml"
        path.write_text(dump_yaml(self.data if data is None else data))
        return path


@pytest.fixture
def tiny_project(tmp_path: Path) -> Callable[..., TinyProject]:
    def make(schema: str = "gemm", name: str = "proj") -> TinyProject:
        return TinyProject(tmp_path / name, schema=schema)

    return make


@pytest.fixture
def module_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Path]:
    """A project folder holding one module (its name, its source): the working directory, its
    modules importable."""

    def make(module: str, source: str) -> Path:
        (tmp_path / f"{module}.py").write_text(source)
        monkeypatch.chdir(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))
        return tmp_path

    return make
