"""CLI verbs that need no campaign round: parse-csv, check, tips, and error exit codes."""

from __future__ import annotations

import json
import sys

import pytest

from kernel_ratchet import cli
from kernel_ratchet.harness.csv_schema import GEMM_HEADER
from tests.campaign.conftest import EXAMPLE

ROW = "m64,1,64,64,64,PASS,1.5,0.1,3.0,0.2,0.35,0.35,45.1,44.0,43.9\n"


def run(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["ratchet", *args])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_parse_csv_json_and_drift(tmp_path, monkeypatch, capsys):
    good = tmp_path / "good.csv"
    good.write_text(GEMM_HEADER + "\n" + ROW)
    code, out, _ = run(monkeypatch, capsys, "parse-csv", str(good), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "gemm" and data["rows"][0]["fwd"] == 1.5
    assert data["rows"][0]["snr"]["db_snr"] == 43.9
    bad = tmp_path / "bad.csv"
    bad.write_text(GEMM_HEADER.replace("out_snr", "output_snr") + "\n" + ROW)
    code, _, err = run(monkeypatch, capsys, "parse-csv", str(bad))
    assert code == 4 and "out_snr" in err and "output_snr" in err


def test_parse_csv_json_is_strict_json(tmp_path, monkeypatch, capsys):
    good = tmp_path / "nan.csv"
    good.write_text(GEMM_HEADER + "\n" + ROW.replace(",1.5,", ",nan,").replace(",3.0,", ",inf,"))
    code, out, _ = run(monkeypatch, capsys, "parse-csv", str(good), "--json")
    assert code == 0
    assert "NaN" not in out and "Infinity" not in out

    def strict(token):
        raise ValueError(token)

    row = json.loads(out, parse_constant=strict)["rows"][0]
    assert row["fwd"] is None
    code, help_text, _ = run(monkeypatch, capsys, "parse-csv", "--help")
    assert code == 0 and "null" in help_text


def test_check_reports_problems_with_exit_1(tmp_path, monkeypatch, capsys):
    import shutil

    proj = tmp_path / "p"
    shutil.copytree(EXAMPLE, proj)
    (proj / "tiny_gemm/kernel.py").unlink()
    monkeypatch.chdir(proj)
    code, out, _ = run(monkeypatch, capsys, "check", "--op", "tiny_gemm")
    assert code == 1 and "NO" in out and "kernel.py" in out


def test_tips_add_then_show(tmp_path, monkeypatch, capsys):
    import shutil

    proj = tmp_path / "p"
    shutil.copytree(EXAMPLE, proj)
    monkeypatch.chdir(proj)
    code, out, _ = run(
        monkeypatch,
        capsys,
        "tips",
        "add",
        "--op",
        "tiny_gemm",
        "--round",
        "3",
        "--status",
        "ROLLED BACK",
        "--context",
        "interpreter",
        "--signal",
        "-36%",
        "--takeaway",
        "small BLOCK_K doubles the k-loop",
        "--applicability",
        "any Triton GEMM",
        "--gpu",
        "cpu",
    )
    assert code == 0
    path = proj / "ratchet-tips/cpu/tiny_gemm/triton/tips.md"
    text = path.read_text()
    assert "round-3 — ROLLED BACK" in text and "- Takeaway: small BLOCK_K" in text
    code, out, _ = run(monkeypatch, capsys, "tips", "show", "--op", "tiny_gemm", "--gpu", "cpu")
    assert code == 0 and "small BLOCK_K doubles the k-loop" in out
    code, _, err = run(
        monkeypatch,
        capsys,
        "tips",
        "add",
        "--op",
        "tiny_gemm",
        "--round",
        "3",
        "--status",
        "MAYBE",
        "--context",
        "x",
        "--signal",
        "x",
        "--takeaway",
        "x",
        "--applicability",
        "x",
    )
    assert code == 2 and "--status" in err


@pytest.mark.parametrize("args", [("status",), ("status", "--json")])
def test_reading_the_records_does_not_import_torch(baselined, args):
    """A status poll (an agent's, a dashboard's) answers in a fraction of a second: torch (a
    second to import) is loaded only by commands that measure or run kernels."""
    import subprocess

    from tests.campaign.conftest import cli_env

    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('torch loaded:', 'torch' in sys.modules, file=sys.stderr))\n"
        f"sys.argv = ['ratchet', *{list(args)!r}]\n"
        "from kernel_ratchet.cli import main\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=baselined,
        env=cli_env(baselined),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch loaded: False" in r.stderr, r.stderr


def test_command_help_wraps_to_the_terminal_not_to_the_docstring():
    """A docstring's line breaks inside a paragraph left ragged lines in the command list;
    list items keep theirs."""
    from typer.testing import CliRunner

    from kernel_ratchet.cli.help_text import unwrapped

    out = CliRunner().invoke(cli.app, ["--help"], env={"COLUMNS": "200"}).output
    assert "an index of them (charts drawn by plotly, inlined: the pages open" in out, out
    doc = "One paragraph\nwrapped here.\n\nItems:\n- first\n  continued\n- second"
    assert unwrapped(doc) == "One paragraph wrapped here.\n\nItems:\n- first\n  continued\n- second"


def test_the_baseline_records_where_its_time_went(baselined):
    """Round 1 says how long its focused test and its harness took, like every later round."""
    from tests.campaign.conftest import campaign_dir, ratchet

    record = json.loads((campaign_dir(baselined) / "rounds/round-1/round.json").read_text())
    sec = record["seconds"]
    assert set(sec) == {"test", "harness_full", "measure"}, sec
    assert sec["test"] > 0 and sec["harness_full"] > 0
    assert sec["measure"] >= sec["test"] + sec["harness_full"] - 0.2  # each rounded to 0.1 s
    r = ratchet(baselined, "status", "--json")
    assert r.returncode == 0, r.stderr
    (first,) = [x for x in json.loads(r.stdout)["rounds"] if x["round"] == 1]
    assert first["seconds"] == sec


def test_the_live_round_table_ends_its_line_off_a_terminal(monkeypatch):
    """Off a terminal (a log file, an agent's pipe) the last table of `ratchet run` ends with a
    newline, so what the command prints next starts on a line of its own."""
    import io

    from rich.console import Console

    from kernel_ratchet.cli import run

    buf = io.StringIO()
    monkeypatch.setattr(run, "err", Console(file=buf, force_terminal=False, width=80))
    with run._live_view("t") as (say, _):
        say("a round")
    assert buf.getvalue().endswith("┘\n"), buf.getvalue()[-40:]
    buf.seek(0), buf.truncate()  # and where the run stops on an error, whose message comes next
    with pytest.raises(RuntimeError), run._live_view("t") as (say, _):
        say("baseline")
        raise RuntimeError("failed")
    assert buf.getvalue().endswith("┘\n"), buf.getvalue()[-40:]
    buf.seek(0), buf.truncate()  # a run refused before its first message prints no table
    with pytest.raises(RuntimeError), run._live_view("t"):
        raise RuntimeError("refused")
    assert buf.getvalue() == ""


def test_tables_are_not_wrapped_at_80_columns_on_a_pipe(monkeypatch):
    import io

    from kernel_ratchet.cli.common import PIPED_WIDTH, _width

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    assert _width(io.StringIO()) == PIPED_WIDTH > 80
    assert _width(Tty()) is None  # rich measures the terminal
    monkeypatch.setenv("COLUMNS", "100")
    assert _width(io.StringIO()) is None  # rich reads COLUMNS


def test_the_round_line_says_a_rehearsals_verdict_once():
    from types import SimpleNamespace

    from kernel_ratchet.cli.rounds import round_line

    label = "REHEARSAL: would roll back"
    rehearsed = SimpleNamespace(
        round=2,
        label=label,
        level="quick",
        accepted=False,
        rehearsal=True,
        reason=f"{label} (+3.10%), rolled back and not committed; measured: no gain",
    )
    line = round_line(rehearsed)
    assert line.count("would roll back") == 1, line
    assert line.startswith("round-2 [yellow]REHEARSAL: would roll back[/yellow] (quick) (+3.10%)")
    accepted = SimpleNamespace(
        round=3, label="ACCEPTED", level="full", accepted=True, rehearsal=False, reason="1.02x"
    )
    assert round_line(accepted) == "round-3 [green]ACCEPTED[/green] (full): 1.02x"


def test_the_cli_prints_bracketed_text_as_it_is_and_styles_only_what_asks(capsys):
    """A round's reason names pytest ids (``test_q[m32-fp32]``) and commands (``pip install
    '.[dev]'``): rich took them for markup tags and dropped them from the terminal's line."""
    from types import SimpleNamespace

    from kernel_ratchet.cli.common import err, out
    from kernel_ratchet.cli.rounds import round_line

    # soft_wrap: one line whatever width the console took (the assertions read whole lines)
    out.print(
        "focused test failed: tests/k.py::test_q[m32-fp32], pip install '.[dev]'", soft_wrap=True
    )
    err.print("[red]error:[/red] [bold]x[/bold]", markup=True)
    got = capsys.readouterr()
    assert "tests/k.py::test_q[m32-fp32], pip install '.[dev]'" in got.out
    assert got.err.strip() == "error: x"
    rolled = SimpleNamespace(
        round=4,
        label="ROLLED BACK",
        level="quick",
        accepted=False,
        rehearsal=False,
        reason="focused test failed: 2 failed: t.py::q[m32], t.py::q[[x]]",
    )
    out.print(round_line(rolled), markup=True, soft_wrap=True)
    line = capsys.readouterr().out.strip()
    assert (
        line
        == "round-4 ROLLED BACK (quick): focused test failed: 2 failed: t.py::q[m32], t.py::q[[x]]"
    )
