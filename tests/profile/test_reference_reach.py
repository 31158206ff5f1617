"""The files an op's reference reads must be out of a round's reach (kernel_source): else a
candidate changes the kernel and its truth together and a wrong kernel is accepted."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.reference_reach import changeable_truth, check_reach, reach


def _files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


KERNEL = ["pkg/kernel.py"]


@pytest.mark.parametrize(
    ("files", "reference", "why"),
    [
        (  # the reference in the kernel file
            {"pkg/kernel.py": "def ref(x):\n    return x\n"},
            "pkg.kernel:ref",
            "the reference's module pkg.kernel",
        ),
        (  # a helper shared with the kernel file
            {"pkg/reference.py": "from pkg.kernel import mean_square\n"},
            "pkg.reference:ref",
            "which imports pkg.kernel",
        ),
        (  # relative, inside the function, through another module of the project
            {
                "pkg/reference.py": "def ref(x):\n    from .util import norm\n    return norm(x)\n",
                "pkg/util.py": "from . import kernel\n",
            },
            "pkg.reference:ref",
            "which imports pkg.util, which imports pkg",
        ),
        (  # a name the package re-exports from the kernel file
            {
                "pkg/__init__.py": "from .kernel import mean_square\n",
                "pkg/reference.py": "from pkg import mean_square\n",
            },
            "pkg.reference:ref",
            "through pkg/__init__.py",
        ),
    ],
    ids=["defined-there", "shared-helper", "relative-transitive", "re-exported"],
)
def test_a_reference_that_reads_a_kernel_file_is_named_with_its_path(
    tmp_path: Path, files, reference, why
):
    root = _files(tmp_path, {"pkg/__init__.py": "", "pkg/kernel.py": "", **files})
    bad = changeable_truth(root, reference, KERNEL)
    assert len(bad) == 1 and bad[0].startswith("pkg/kernel.py (") and why in bad[0], bad


def test_a_package_that_re_exports_its_kernels_leaves_other_names_out_of_reach(tmp_path: Path):
    root = _files(
        tmp_path,
        {
            "pkg/__init__.py": "from .kernel import rms_norm\nfrom .consts import EPS\n",
            "pkg/kernel.py": "",
            "pkg/consts.py": "EPS = 1e-6\n",
            "pkg/reference.py": "import torch\nfrom pkg import EPS\n",
        },
    )
    assert changeable_truth(root, "pkg.reference:ref", KERNEL) == []
    assert set(reach(root, "pkg.reference")) == {
        "pkg/reference.py",
        "pkg/__init__.py",
        "pkg/consts.py",
    }


def test_check_refuses_a_shared_helper_and_an_adapter_in_kernel_source(tiny_project):
    p = tiny_project()
    (p.root / p.pkg / "reference.py").write_text(f"from {p.pkg}.kernel import helper\n")
    p.op.pop("adapter")
    p.op.update(
        function=f"{p.pkg}.kernel:op",
        reference=f"{p.pkg}.reference:ref",
        inputs={"x": "[M, N] float32"},
        outputs=["y"],
        flops="2*M*N",
    )
    p.op.pop("shapes")
    p.op["shapes"] = [{"label": "a", "M": 4, "N": 8}]
    profile = load_profile(p.write())
    line = check_reach(profile, profile.op("gemm_bf16"))
    assert (
        not line.ok and f"{p.pkg}/kernel.py" in line.detail and "outside kernel_source" in line.fix
    )

    q = tiny_project(name="adapter")
    q.op["kernel_source"].append(f"{q.pkg}/adapter.py")
    profile = load_profile(q.write())
    line = check_reach(profile, profile.op("gemm_bf16"))
    assert not line.ok and "reference() is the truth" in line.detail
    q.op["kernel_source"].pop()
    profile = load_profile(q.write())
    assert check_reach(profile, profile.op("gemm_bf16")).ok


def test_a_package_imported_whole_is_its_init_alone(tmp_path: Path):
    root = _files(
        tmp_path,
        {
            "pkg/__init__.py": "from . import kernel\n",
            "pkg/kernel.py": "",
            "pkg/reference.py": "import pkg\nimport pkg.consts\n",
            "pkg/consts.py": "",
        },
    )
    assert changeable_truth(root, "pkg.reference:ref", KERNEL) == []
    assert set(reach(root, "pkg.reference")) == {
        "pkg/reference.py",
        "pkg/__init__.py",
        "pkg/consts.py",
    }


def test_a_module_that_also_wraps_the_kernel_holds_a_reference_out_of_its_reach(tmp_path: Path):
    """Wrappers calling the kernel (imported inside them) beside a plain-torch reference."""
    root = _files(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/kernel.py": "",
            "pkg/ops.py": (
                "import torch\n\n"
                "def wrapper(x):\n    from pkg.kernel import run\n    return run(x)\n\n"
                "def ref(x):\n    return x\n"
            ),
        },
    )
    assert changeable_truth(root, "pkg.ops:ref", KERNEL) == []
    assert changeable_truth(root, "pkg.ops:wrapper", KERNEL) != []


def test_imports_only_a_type_checker_reads_are_out_of_reach(tmp_path: Path):
    root = _files(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/kernel.py": "",
            "pkg/reference.py": (
                "from typing import TYPE_CHECKING\nimport typing\n"
                "if TYPE_CHECKING:\n    from pkg.kernel import Config\n"
                "if typing.TYPE_CHECKING:\n    import pkg.kernel\n"
            ),
        },
    )
    assert changeable_truth(root, "pkg.reference:ref", KERNEL) == []


def test_imports_that_do_not_run_at_import_are_out_of_reach(tmp_path: Path):
    """A self-test under __main__, a method's lazy import, a helper module's function that
    imports the kernel when called: none runs when the reference is imported."""
    root = _files(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/kernel.py": "",
            "pkg/util.py": "def bench():\n    from pkg.kernel import run\n    return run\n",
            "pkg/reference.py": (
                "from pkg.util import bench\n"
                "class Wrap:\n    def forward(self):\n        from pkg.kernel import run\n\n"
                "def ref(x):\n    return x\n\n"
                "if __name__ == '__main__':\n    from pkg.kernel import run\n"
            ),
        },
    )
    assert changeable_truth(root, "pkg.reference:ref", KERNEL) == []
    (root / "pkg/util.py").write_text("from pkg import kernel\n")  # at import: in reach
    assert changeable_truth(root, "pkg.reference:ref", KERNEL) != []
