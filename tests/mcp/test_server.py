"""`ratchet mcp` driven by the official SDK's own client over stdio (a subprocess server).

The campaign is the CPU example, baselined, with one ACCEPTED and one ROLLED BACK round. Every
test starts `python -m kernel_ratchet.cli mcp` in the project, lists or calls tools and checks
the answers against the campaign's files.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("mcp")

import anyio  # noqa: E402  (a dependency of mcp)
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from kernel_ratchet.mcp.tools import TOOL_NAMES  # noqa: E402
from tests.campaign.conftest import (  # noqa: E402
    ACCEPTED_HYPOTHESIS,
    break_kernel,
    campaign_dir,
    cli_env,
    make_project,
    ratchet,
    session_two_rounds,
)

pytestmark = pytest.mark.slow


def _ok(r):
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory) -> Path:
    """Baselined CPU example with round-2 ACCEPTED (32x32 tiles) and round-3 ROLLED BACK."""
    return session_two_rounds(tmp_path_factory)


class Client:
    """One tool call's answer: (is_error, parsed JSON or raw text)."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments: Any) -> tuple[bool, Any]:
        res = await self.session.call_tool(name, arguments)
        err = getattr(res, "is_error", None)
        if err is None:  # mcp 1.x spelling
            err = getattr(res, "isError", False)
        text = res.content[0].text
        try:
            return bool(err), json.loads(text)
        except json.JSONDecodeError:
            return bool(err), text


def run_session(root: Path, body) -> Any:
    """Start `ratchet mcp` in ``root``, run ``await body(client)``, return its result."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kernel_ratchet.cli", "mcp"],
        env=cli_env(root),
        cwd=str(root),
    )

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await body(Client(s))

    return anyio.run(main)


def test_lists_all_tools_and_parses_a_csv(two_rounds):
    csv = campaign_dir(two_rounds) / "rounds/round-1/artifacts/benchmark.csv"
    bad = two_rounds / "bad.csv"
    bad.write_text("label,M,N\nx,1,2\n")

    async def body(c: Client):
        names = [t.name for t in (await c.session.list_tools()).tools]
        return (
            names,
            await c.call("parse_bench_csv", path=str(csv)),
            await c.call("parse_bench_csv", path="bad.csv"),
        )

    names, (err, parsed), (bad_err, bad_text) = run_session(two_rounds, body)
    assert set(TOOL_NAMES) <= set(names)
    n = len(yaml.safe_load((csv.parents[3] / "manifest.yaml").read_text())["target_shapes"])
    assert not err and parsed["schema"] == "gemm" and len(parsed["rows"]) == n
    assert all(r["Check"] == "PASS" for r in parsed["rows"])
    assert bad_err and "SchemaError" in bad_text  # the RatchetError's class and message


def test_campaign_tools_read_the_records(two_rounds):
    async def body(c: Client):
        out = {}
        for name in (
            "campaign_status",
            "query_trend",
            "list_ineffective_directions",
            "read_best_summary",
        ):
            out[name] = await c.call(name)
        out["append"] = await c.call(
            "append_tip",
            round=2,
            status="ACCEPTED",
            context="tiny_gemm on cpu",
            signal="+160% quick",
            takeaway="bigger output tiles first",
            applicability="interpreter rehearsals",
        )
        out["tips"] = await c.call("query_tips")
        out["dry"] = await c.call("run_quick_validation")
        return out

    out = run_session(two_rounds, body)
    assert not any(err for err, _ in out.values()), out
    status = out["campaign_status"][1]
    assert status["incumbent_round"] == 2 and status["next_round"] == 4
    assert [r["status"] for r in status["rounds"]] == ["BASELINE", "ACCEPTED", "ROLLED BACK"]
    trend = out["query_trend"][1]["rows"]
    assert [r["Round"] for r in trend] == ["round-1", "round-2", "round-3"]
    assert trend[1]["Status"] == "ACCEPTED"
    (direction,) = out["list_ineffective_directions"][1]["directions"]
    assert direction["round"] == 3 and direction["category"] == "test"
    assert direction["lesson"] == "off by one"
    best = out["read_best_summary"][1]
    assert best["round"] == 2 and best["summary"].startswith("# round-2 — ACCEPTED")
    assert best["record"]["hypothesis"] == ACCEPTED_HYPOTHESIS
    tips = out["tips"][1]
    assert "bigger output tiles first" in tips["tips"]
    assert tips["path"].endswith("ratchet-tips/cpu/tiny_gemm/triton/tips.md")
    dry = out["dry"][1]
    reps = status["representative_shapes"]
    assert dry["ok"] and dry["all_pass"] and [r["label"] for r in dry["rows"]] == reps
    assert dry["csv"].startswith("profiles/dryrun-")
    assert (campaign_dir(two_rounds) / dry["csv"]).exists()
    assert dry["preview"]["incumbent_round"] == 2
    # the tree holds the incumbent: nothing to preview as a round, whatever the timing read
    assert dry["preview"]["would_be"] == "no round: the kernel files equal the incumbent's"
    assert dry["preview"]["method"].startswith("unpaired: this run against round-2's CSV")
    # a dry run is not a round
    assert not (campaign_dir(two_rounds) / "rounds/round-4").exists()


def test_validate_round_over_mcp(two_rounds, tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(two_rounds, root, symlinks=True)
    kernel = (root / "tiny_gemm/kernel.py").read_text()

    async def body(c: Client):
        unchanged = await c.call("validate_round", hypothesis="nothing changed")
        break_kernel(root)
        rolled = await c.call("validate_round", hypothesis="shifted loads", lesson="indexing")
        return unchanged, rolled

    (err, text), (err2, res) = run_session(root, body)
    assert err and "CampaignError" in text and "equal the incumbent" in text
    assert not err2, res
    assert res["record"]["round"] == 4 and res["record"]["status"] == "ROLLED BACK"
    assert res["record"]["category"] == "test" and res["consecutive_rollbacks"] == 2
    assert (root / "tiny_gemm/kernel.py").read_text() == kernel  # rolled back


def test_baseline_over_mcp(tmp_path):
    """A campaign started with `ratchet init` takes its BASELINE through the server; a known
    failure of two lines is refused before anything is measured."""
    root = make_project(tmp_path / "proj")
    r = ratchet(root, "init", "--op", "tiny_gemm", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr

    async def body(c: Client):
        two_lines = await c.call("baseline", known_failure="rows of 20\nare zero")
        return two_lines, await c.call("baseline"), await c.call("baseline")

    (err, text), (err2, res), (err3, again) = run_session(root, body)
    assert err and "CampaignError" in text and "in one line" in text
    assert not err2, res
    rec = res["record"]
    assert rec["round"] == 1 and rec["status"] == "BASELINE", rec
    assert rec["reason"].startswith("baseline: ") and res["representative_shapes"]
    assert (campaign_dir(root) / "rounds/round-1/round.json").exists()
    assert err3 and "the baseline is taken already" in again


def test_missing_sdk_names_the_extra(monkeypatch):
    from kernel_ratchet.errors import RatchetError
    from kernel_ratchet.mcp import server

    for mod in ("mcp.server.mcpserver", "mcp.server.fastmcp"):
        monkeypatch.setitem(sys.modules, mod, None)  # an import of it raises ImportError
    with pytest.raises(RatchetError, match=r"kernel-ratchet\[mcp\]"):
        server.build_server()
