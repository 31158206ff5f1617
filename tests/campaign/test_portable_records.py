"""Records name files relative to the project root and the interpreter as ``python``, so a
campaign directory copied into a repository reads the same on any machine; campaigns recorded
with absolute paths still load, continue and verify."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from kernel_ratchet.campaign.fsutil import atomic_write_text, file_sha256, sha256_bytes
from kernel_ratchet.campaign.rounds.paired import portable_run
from kernel_ratchet.campaign.steps import (
    portable_command,
    portable_path,
    python_command,
    recorded_python_command,
    run_step,
)
from kernel_ratchet.harness.paired_run import Failure, PairedRun
from tests.campaign.conftest import campaign_dir, git, typo_kernel
from tests.cli_inprocess import run_cli

RECORDS = (
    "manifest.yaml",
    "logs/*.md",
    "rounds/*/round.json",
    "rounds/*/summary.md",
    "rounds/*/artifacts/*.log",
    "rounds/*/artifacts/*.json",
    "report.md",
)


def _record_texts(cdir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(cdir)): p.read_text() for pattern in RECORDS for p in cdir.glob(pattern)
    }


@pytest.mark.slow
def test_records_name_files_from_the_project_root(baselined, project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    rc, out = run_cli(capsys, monkeypatch, "report")
    assert rc == 0, out
    # nothing was accepted: the project is handed back on main, the empty branch deleted
    flat = " ".join(out.split())
    assert flat.index("written to") < flat.index("the project is back on main"), out  # last
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    cdir = campaign_dir(project)
    texts = _record_texts(cdir)
    assert {"manifest.yaml", "logs/optimize.md", "rounds/round-1/round.json", "report.md"} <= set(
        texts
    )
    machine = {str(baselined), str(baselined.resolve()), str(project), sys.executable}
    for name, text in texts.items():
        found = [m for m in machine if m in text]
        assert not found, f"{name} names {found}"
    rel = f".ratchet/campaigns/{cdir.name}"
    manifest = yaml.safe_load(texts["manifest.yaml"])
    assert manifest["project_skill"] == "ratchet.yaml"
    assert manifest["quick_command"] == f"python {rel}/quick_test_bench.py"
    assert f"- Quick command: `python {rel}/quick_test_bench.py`" in texts["logs/optimize.md"]
    command = json.loads(texts["rounds/round-1/round.json"])["harness_command"]
    assert command == (
        f"python {rel}/quick_test_bench.py --level full "
        f"--summary-csv {rel}/rounds/round-1/artifacts/benchmark.csv"
    )
    assert f"- Benchmark command: `{command}`" in texts["rounds/round-1/summary.md"]
    words = shlex.split(command)
    for tok in (words[1], words[-1]):  # the files it names, from the project root
        assert (project / tok).is_file(), tok


def _absolute(cdir: Path, rel: str, root: Path, python: str) -> None:
    """Rewrite one record as a campaign written with absolute paths held it."""
    path = cdir / rel
    text = path.read_text()
    old = text.replace("python .ratchet/", f"{python} {root}/.ratchet/")
    old = old.replace("--summary-csv .ratchet/", f"--summary-csv {root}/.ratchet/")
    old = old.replace("project_skill: ratchet.yaml", f"project_skill: {root}/ratchet.yaml")
    assert old != text, rel
    atomic_write_text(path, old)


def _as_absolute_campaign(root: Path) -> Path:
    """The baselined campaign in ``root`` as its records read when they held absolute paths,
    sealed as they were written (round files hashed, the log's length, hash and shadow)."""
    cdir = campaign_dir(root)
    log = "logs/optimize.md"
    for rel in ("manifest.yaml", log):
        _absolute(cdir, rel, root, "python")
    for rel in ("rounds/round-1/round.json", "rounds/round-1/summary.md"):
        _absolute(cdir, rel, root, sys.executable)
    state = json.loads((cdir / "state.json").read_text())
    for rel in ("rounds/round-1/round.json", "rounds/round-1/summary.md", "manifest.yaml"):
        state["records"][rel] = file_sha256(cdir / rel)
    data = (cdir / log).read_bytes()
    state["logs"][log] = {"len": len(data), "sha256": sha256_bytes(data)}
    atomic_write_text(cdir / ".shadow" / log.replace("/", "__"), data.decode())
    atomic_write_text(cdir / "state.json", json.dumps(state, indent=2))
    return cdir


@pytest.mark.slow
def test_a_campaign_recorded_with_absolute_paths_continues(project, capsys, monkeypatch):
    cdir = _as_absolute_campaign(project)
    old_round = (cdir / "rounds/round-1/round.json").read_text()
    assert f"{sys.executable} {project}/.ratchet/" in old_round
    monkeypatch.chdir(project)
    rc, out = run_cli(capsys, monkeypatch, "status")
    assert rc == 0, out
    typo_kernel(project)  # a round that closes without starting a process
    rc, out = run_cli(capsys, monkeypatch, "validate", "--hypothesis", "a typo")
    assert rc == 1 and "does not parse" in out, out
    rc, out = run_cli(capsys, monkeypatch, "status", "--json")
    assert rc == 0, out
    assert [row["status"] for row in json.loads(out)["rounds"]] == ["BASELINE", "ROLLED BACK"]
    assert (cdir / "rounds/round-1/round.json").read_text() == old_round
    # the old records are still sealed: an edit to them is still caught
    (cdir / "rounds/round-1/round.json").write_text(old_round.replace("--level full", "-l full"))
    rc, out = run_cli(capsys, monkeypatch, "status")
    assert rc == 7 and "round-1/round.json" in out, out


def test_recorded_command_names_the_interpreter_and_project_paths(tmp_path):
    root = tmp_path / "my proj"
    (root / "camp").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root)
    outside = tmp_path / "elsewhere.csv"
    assert portable_path(tmp_path / "link" / "camp" / "h.py", root) == "camp/h.py"
    assert portable_path(outside, root) == str(outside)
    assert portable_path("--level", root) == "--level"
    command = recorded_python_command(root, root / "camp" / "h.py", "--csv", root / "camp/b.csv")
    assert command == "python camp/h.py --csv camp/b.csv"
    executed = python_command(root / "camp" / "h.py")
    assert shlex.split(executed) == [sys.executable, str(root / "camp" / "h.py")]


def test_a_step_log_shows_its_command_and_cwd_as_records_name_them(tmp_path):
    root = tmp_path / "proj"
    (root / "camp").mkdir(parents=True)
    log = root / "camp" / "step.log"
    script = root / "camp" / "h.py"
    script.write_text("print('ran')\n")
    step = run_step(
        "s",
        python_command(script, "--out", str(root / "x.csv")),
        cwd=root,
        log_path=log,
        timeout_s=60,
    )
    assert step.ok, step.reason
    head = log.read_text().splitlines()[:2]
    assert head[0] == "$ python camp/h.py --out x.csv", head
    assert head[1] == "# cwd: .. (from this log's folder)" and "ran" in log.read_text()
    # a path outside the project and shell syntax stay as given
    assert portable_command(f"cd {tmp_path} && echo hi", root) == f"cd {tmp_path} && echo hi"


def test_a_failed_step_names_its_failing_tests_and_its_log_from_where_it_ran(tmp_path):
    root = tmp_path / "proj"
    art = root / ".ratchet" / "campaigns" / "c" / "rounds" / "round-2" / "artifacts"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_k.py").write_text(
        "import pytest\n"
        "def test_ok():\n    pass\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_tile(n):\n    raise ValueError(f'flatten and tma_store exclude each other {n}')\n"
    )
    pytest_cmd = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider tests"
    step = run_step("focused test", pytest_cmd, cwd=root, log_path=art / "test.log", timeout_s=120)
    assert not step.ok and step.returncode == 1
    assert str(tmp_path) not in step.reason, step.reason
    assert step.reason.startswith("focused test exited with code 1: 2 failed: ")
    assert "tests/test_k.py::test_tile[1], tests/test_k.py::test_tile[2]" in step.reason
    assert "first error: ValueError: flatten and tma_store exclude each other 1" in step.reason
    # where it was raised: a bare "assert False" alone would not say which check failed
    assert "(at tests/test_k.py:6: raise ValueError(f'flatten and tma_store" in step.reason
    assert step.reason.endswith("(see .ratchet/campaigns/c/rounds/round-2/artifacts/test.log)")
    # any other command: the last line it printed; nothing printed, nothing but the code
    quiet = run_step("build", "exit 4", cwd=root, log_path=art / "quiet.log", timeout_s=60)
    assert quiet.reason == (
        "build exited with code 4 (see .ratchet/campaigns/c/rounds/round-2/artifacts/quiet.log)"
    )
    other = run_step(
        "build", "echo compiling; echo 'nvcc: error: bad flag' >&2; exit 3",
        cwd=root, log_path=art / "build.log", timeout_s=60,
    )  # fmt: skip
    assert other.reason == (
        "build exited with code 3: nvcc: error: bad flag "
        "(see .ratchet/campaigns/c/rounds/round-2/artifacts/build.log)"
    )


def test_a_paired_run_names_its_worker_logs_from_the_campaign(tmp_path):
    cdir = tmp_path / "proj" / ".ratchet" / "campaigns" / "c"
    art = cdir / "rounds" / "round-2" / "artifacts" / "paired"
    logs = {side: str(art / f"{side}_worker.log") for side in ("incumbent", "candidate")}
    failure = Failure("candidate", "check", "s1", "crash", "boom", logs["candidate"])
    run = PairedRun(("s1",), ("fwd",), "compute_fwd", {}, (), 0, failure, None, 1.0, 0.5, 7, logs)
    got = portable_run(run, SimpleNamespace(rel=lambda p: os.path.relpath(p, cdir)))
    assert got.logs == {side: f"rounds/round-2/artifacts/paired/{side}_worker.log" for side in logs}
    assert str(tmp_path) not in json.dumps(got.to_dict())
    assert "(log: rounds/round-2/artifacts/paired/candidate_worker.log)" in got.failure.sentence()


def test_a_failed_assert_is_named_by_the_line_that_failed_not_the_frames_above(tmp_path):
    """pytest reports a failed ``assert torch.equal(...)`` as ``assert False``: the reason
    names the marked source line where the first traceback ends (the exported records do not
    keep the log), not the frames it passed through nor the later failures."""
    from kernel_ratchet.campaign.log_digest import failure_digest

    log = tmp_path / "test.log"
    log.write_text(
        "____ test_cols[ragged] ____\n\n"
        "    def test_cols(lens):\n>       check(lens)\n\n"
        "tests/kernels/test_q.py:40: \n_ _ _ _ _ _\n\n"
        "    def check(lens):\n        got = cols[:, :8]\n"
        ">       assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))\n"
        "E       assert False\n"
        "E        +  where False = <built-in method equal>(tensor([1]), tensor([2]))\n\n"
        "tests/kernels/test_q.py:31: AssertionError\n"
        "____ test_rows ____\n\n"
        ">       assert rows_ok\nE       assert False\n\n"
        "tests/kernels/test_q.py:12: AssertionError\n"
        "==== short test summary info ====\n"
        "FAILED tests/kernels/test_q.py::test_cols[ragged] - assert False\n"
        "FAILED tests/kernels/test_q.py::test_rows - assert False\n"
    )
    assert failure_digest(log) == (
        "2 failed: tests/kernels/test_q.py::test_cols[ragged], tests/kernels/test_q.py::test_rows;"
        " first error: assert False (at tests/kernels/test_q.py:31: assert torch.equal(got.view"
        "(torch.uint8), want.view(torch.uint8)))"
    )


def test_a_failed_check_that_is_not_pytest_names_its_first_failing_line(tmp_path):
    """The built-in focused check prints one line per shape and a count last: the reason names
    the first FAIL line too, since the exported records do not keep the test's log."""
    from kernel_ratchet.campaign.log_digest import failure_digest

    log = tmp_path / "test.log"
    log.write_text(
        "$ python -m kernel_ratchet.profile.focused xent\n"
        "PASS big: loss 91.0 dB, dlogits 88.2 dB\n"
        "FAIL tiny: loss inf dB, dlogits -3.0 dB\n"
        "FAIL odd: loss inf dB, dlogits -2.9 dB\n"
        "1 passed, 2 failed\n"
    )
    assert (
        failure_digest(log) == "1 passed, 2 failed; first: FAIL tiny: loss inf dB, dlogits -3.0 dB"
    )
    log.write_text("building...\nerror: no such op\n")
    assert failure_digest(log) == "error: no such op"
    scalars = "TypeError: only 0-dimensional arrays can be converted to Python scalars"
    log.write_text(f"FAILED tests/test_kernel.py::test_m - {scalars}\n1 failed\n")
    assert "install numpy<2.4" in failure_digest(log)
