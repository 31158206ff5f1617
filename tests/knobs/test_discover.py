"""Knobs found by reading kernel code: autotune configs and launch arguments, rewritten as one
readable expression edit that a reverse move undoes byte for byte."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from kernel_ratchet.knobs.declared import KnobDecl
from kernel_ratchet.knobs.discover import discover, parse_discovered
from kernel_ratchet.knobs.model import Computed, KnobError
from kernel_ratchet.knobs.tunables import set_knobs

FIXTURES = Path(__file__).parent / "fixtures"
AUTOTUNED = (FIXTURES / "autotuned.py").read_text()
SETTINGS = (FIXTURES / "settings.py").read_text()
LAUNCH = "pkg/settings.py@row_sum/_row_sum_kernel[]"
CONFIG0 = "pkg/autotuned.py@_scale_kernel.configs[0]"


def changed_lines(a: str, b: str) -> list[str]:
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
    return [ln for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]


def move(text: str, rel: str, key: str, decls=(), **changes) -> str:
    new = set_knobs(text, key, changes, parse=parse_discovered(rel, decls))
    ast.parse(new)  # still Python
    return new


def test_every_autotune_config_is_an_entry_with_its_own_values():
    t = discover(AUTOTUNED, "pkg/autotuned.py").tunables
    assert list(t.entries) == [CONFIG0, "pkg/autotuned.py@_scale_kernel.configs[1]"]
    first = t.entries[CONFIG0]
    values = {name: knob.value for name, knob in first.knobs.items()}
    assert values == {"BLOCK_SIZE": 64, "num_warps": 2, "num_stages": 3}  # 3: Triton's default
    assert first.knobs["num_stages"].span is None
    space = {"BLOCK_SIZE": [32, 128], "num_warps": [1, 4], "num_stages": [2, 4]}
    assert t.knob_space(first) == space


def test_an_autotune_move_edits_one_config_and_appends_a_missing_keyword():
    new = move(AUTOTUNED, "pkg/autotuned.py", CONFIG0, BLOCK_SIZE=128, num_stages=4)
    assert changed_lines(AUTOTUNED, new) == [
        '-        triton.Config({"BLOCK_SIZE": 64}, num_warps=2),',
        '+        triton.Config({"BLOCK_SIZE": 128}, num_warps=2, num_stages=4),',
    ]
    assert move(new, "pkg/autotuned.py", CONFIG0, BLOCK_SIZE=64) != AUTOTUNED  # keyword stays
    back = move(AUTOTUNED, "pkg/autotuned.py", CONFIG0, num_warps=4)
    assert move(back, "pkg/autotuned.py", CONFIG0, num_warps=2) == AUTOTUNED


def test_configs_bound_to_a_module_name_are_found():
    text = AUTOTUNED.replace("@triton.autotune(\n    configs=[", "CONFIGS = [").replace(
        "    ],\n    key=", "]\n\n\n@triton.autotune(configs=CONFIGS, key="
    )
    assert "configs=CONFIGS" in text
    assert CONFIG0 in discover(text, "pkg/autotuned.py").tunables.entries


def test_launch_arguments_computed_at_run_time_move_by_a_factor():
    t = discover(SETTINGS, "pkg/settings.py").tunables
    (entry,) = t.entries.values()
    assert entry.key == LAUNCH
    assert entry.knobs["num_warps"].value == 1.0 and entry.knobs["num_warps"].base == "num_warps"
    assert entry.knobs["num_stages"].value == 3  # omitted at a plain launch: Triton's default
    assert 2.0 in t.knob_space(entry)["BLOCK_SIZE"]
    new = move(SETTINGS, "pkg/settings.py", LAUNCH, num_warps=2.0)
    (old_line, new_line) = changed_lines(SETTINGS, new)
    doubled = "num_warps=min(num_warps * 2, 32)"  # 32 warps: 1,024 threads, the limit
    assert new_line == "+" + old_line[1:].replace("num_warps=num_warps", doubled)
    assert discover(new, "pkg/settings.py").tunables.entries[LAUNCH].knobs["num_warps"].value == 2
    halved = move(new, "pkg/settings.py", LAUNCH, num_warps=0.5)
    assert "num_warps=max(num_warps // 2, 1)" in halved  # never 0 warps
    assert move(halved, "pkg/settings.py", LAUNCH, num_warps=1.0) == SETTINGS


def test_a_compound_expression_is_parenthesised_and_reverts_exactly():
    text = SETTINGS.replace("num_warps=num_warps\n", "num_warps=num_warps + extra\n")
    new = move(text, "pkg/settings.py", LAUNCH, num_warps=4.0)
    assert "num_warps=min((num_warps + extra) * 4, 32)" in new
    assert discover(new, "pkg/settings.py").tunables.entries[LAUNCH].knobs["num_warps"].value == 4
    assert move(new, "pkg/settings.py", LAUNCH, num_warps=1.0) == text


def test_a_block_variable_used_elsewhere_is_not_scaled_at_the_launch_alone():
    text = SETTINGS.replace(
        "_row_sum_kernel[(n_rows,)]", "_row_sum_kernel[(triton.cdiv(n_rows, BLOCK_SIZE),)]"
    )
    knobs = discover(text, "pkg/settings.py").tunables.entries[LAUNCH].knobs
    assert "BLOCK_SIZE" not in knobs and "num_warps" in knobs


def test_values_read_from_a_config_object_are_left_to_where_they_are_defined():
    text = SETTINGS.replace("num_warps=num_warps", "num_warps=cfg.num_warps")
    knobs = discover(text, "pkg/settings.py").tunables.entries[LAUNCH].knobs
    assert "num_warps" not in knobs and "BLOCK_SIZE" in knobs


def test_a_literal_launch_argument_moves_to_its_power_of_two_neighbours():
    text = SETTINGS.replace("num_warps=num_warps", "num_warps=4")
    t = discover(text, "pkg/settings.py").tunables
    assert t.knob_space(t.entries[LAUNCH])["num_warps"] == [2, 8]


def test_a_declaration_sets_the_values_of_a_launch_argument_and_reverts_exactly():
    decls = [KnobDecl("num_warps", "pkg/settings.py", (4, 8), within="row_sum")]
    found = discover(SETTINGS, "pkg/settings.py", decls)
    entry = found.tunables.entries[LAUNCH]
    assert entry.knobs["num_warps"].value == Computed("num_warps")
    assert found.tunables.knob_space(entry)["num_warps"] == [4, 8]
    new = move(SETTINGS, "pkg/settings.py", LAUNCH, decls, num_warps=8)
    assert [ln for ln in changed_lines(SETTINGS, new) if ln[0] == "+"][0].endswith("num_warps=8")
    back = move(new, "pkg/settings.py", LAUNCH, decls, num_warps=Computed("num_warps"))
    assert back == SETTINGS


def test_declarations_reach_assignments_and_name_what_they_miss():
    decls = [
        KnobDecl("num_warps", "pkg/settings.py", (4, 8, 16), within="calculate_settings"),
        KnobDecl("nothing_here", "pkg/settings.py", (1, 2)),
        KnobDecl("num_stages", "pkg/settings.py", ()),  # [] keeps the search away
    ]
    found = discover(SETTINGS, "pkg/settings.py", decls)
    assert [d.name for d in found.unmatched] == ["nothing_here"]
    t = found.tunables
    sites = [k for k in t.entries if k.startswith("pkg/settings.py@calculate_settings.")]
    assert len(sites) == 3  # num_warps = 4 / 8 / 16: three assignments in the helper
    assert "num_stages" not in t.knob_space(t.entries[LAUNCH])
    new = move(SETTINGS, "pkg/settings.py", sites[0], decls, num_warps=16)
    assert changed_lines(SETTINGS, new) == ["-    num_warps = 4", "+    num_warps = 16"]


def test_a_file_that_does_not_parse_is_a_clear_error():
    with pytest.raises(KnobError, match="pkg/bad.py does not parse"):
        discover("def broken(:\n", "pkg/bad.py")


LIBRARY_AUTOTUNED = """
import triton
import triton.language as tl
from mylib.cache import cached_autotune

WIDTHS = [8, 16, 32]


@cached_autotune(
    configs=[triton.Config({"BT": bt}, num_warps=w) for w in [2, 4] for bt in WIDTHS], key=["D"]
)
@triton.jit
def norm_kernel(x, y, D: tl.constexpr, BT: tl.constexpr):
    pass


def norm(x, y):
    norm_kernel[(1,)](x=x, y=y, D=x.shape[-1])
"""


def test_a_library_autotuner_gets_no_launch_keywords_its_configs_already_set():
    """A kernel under a library's own autotune decorator (not ``triton.autotune``) already has
    ``num_warps`` in its configs: adding it at the launch would be a TypeError, never a move."""
    found = discover(LIBRARY_AUTOTUNED, "pkg/norm.py")
    assert all("num_warps" not in e.knobs for e in found.tunables.entries.values())
    decl = KnobDecl("WIDTHS", "pkg/norm.py", ([16, 32], [8, 16]))
    tunables = discover(LIBRARY_AUTOTUNED, "pkg/norm.py", [decl]).tunables
    assert tunables.space["pkg/norm.py@module.WIDTHS"] == {"WIDTHS": [[16, 32], [8, 16]]}


def test_the_candidate_lists_of_a_config_comprehension_are_knobs_with_no_declaration():
    """``[Config({"BT": bt}, num_warps=w) for w in [2, 4] for bt in WIDTHS]``: the inline list
    and the module-level one are both found; a move narrows the autotuner's choice."""
    tunables = discover(LIBRARY_AUTOTUNED, "pkg/norm.py").tunables
    assert tunables.space == {
        "pkg/norm.py@norm_kernel.configs.w": {"w": [[2], [4]]},
        "pkg/norm.py@module.WIDTHS": {"WIDTHS": [[8], [16], [32], [16, 32], [8, 16]]},
    }
    parse = parse_discovered("pkg/norm.py")
    moved = set_knobs(LIBRARY_AUTOTUNED, "pkg/norm.py@norm_kernel.configs.w", {"w": [4]}, parse)
    assert changed_lines(LIBRARY_AUTOTUNED, moved) == [
        '-    configs=[triton.Config({"BT": bt}, num_warps=w) for w in [2, 4] for bt in WIDTHS], '
        'key=["D"]',
        '+    configs=[triton.Config({"BT": bt}, num_warps=w) for w in [4] for bt in WIDTHS], '
        'key=["D"]',
    ]
    back = set_knobs(moved, "pkg/norm.py@norm_kernel.configs.w", {"w": [2, 4]}, parse)
    assert back == LIBRARY_AUTOTUNED


def test_a_candidate_list_computed_at_run_time_is_left_to_a_declaration():
    text = LIBRARY_AUTOTUNED.replace("WIDTHS = [8, 16, 32]", "WIDTHS = [8] if AMD else [8, 16]")
    assert list(discover(text, "pkg/norm.py").tunables.space) == [
        "pkg/norm.py@norm_kernel.configs.w"
    ]


def test_a_declared_list_value_is_written_and_reverts_exactly():
    """An autotuner's candidate list declared as a knob moves as a plain list literal."""
    decl = KnobDecl("WIDTHS", "pkg/norm.py", ([16, 32], [8, 16]))
    parse = parse_discovered("pkg/norm.py", [decl])
    key = "pkg/norm.py@module.WIDTHS"
    moved = set_knobs(LIBRARY_AUTOTUNED, key, {"WIDTHS": [16, 32]}, parse=parse)
    assert "WIDTHS = [16, 32]\n" in moved and moved.count("\n") == LIBRARY_AUTOTUNED.count("\n")
    assert set_knobs(moved, key, {"WIDTHS": [8, 16, 32]}, parse=parse) == LIBRARY_AUTOTUNED


def _splatted(meta: str) -> str:
    """The fixture's launch with its keywords passed through a dict ``meta``."""
    text = SETTINGS.replace(
        "    _row_sum_kernel[(n_rows,)](\n"
        "        x, out, x.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps\n"
        "    )",
        f"    meta = {meta}\n    _row_sum_kernel[(n_rows,)](x, out, x.stride(0), n_cols, **meta)",
    )
    assert "**meta" in text
    return text


def test_a_default_the_launchs_keyword_dict_passes_is_not_a_knob():
    """A ``**meta`` that sets num_warps: appending ``num_warps=`` after it would pass it
    twice (a TypeError at the launch), so only what the dict leaves out is a knob."""
    text = _splatted('{"BLOCK_SIZE": BLOCK_SIZE, "num_warps": num_warps}')
    knobs = discover(text, "pkg/settings.py").tunables.entries[LAUNCH].knobs
    assert "num_warps" not in knobs and knobs["num_stages"].value == 3
    new = move(text, "pkg/settings.py", LAUNCH, num_stages=4)
    assert "**meta, num_stages=4)" in new


def test_a_keyword_dict_that_cannot_be_read_adds_no_default_knob():
    for meta in ('{"BLOCK_SIZE": BLOCK_SIZE, **extra}', "dict(BLOCK_SIZE=BLOCK_SIZE)"):
        entries = discover(_splatted(meta), "pkg/settings.py").tunables.entries
        assert LAUNCH not in entries or not {"num_warps", "num_stages"} & set(
            entries[LAUNCH].knobs
        ), meta


HEURISTICS = """
import triton
import triton.language as tl
from pkg.cfg import get_cfg

LIT = {"BLOCK": lambda a: 64, "num_warps": lambda a: 4}


@triton.heuristics(LIT)
@triton.jit
def _lit(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.heuristics(get_cfg("dyn"))
@triton.jit
def _dyn(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def _plain(x_ptr, n, BLOCK: tl.constexpr):
    pass


def run(x):
    _lit[(1,)](x, 4, BLOCK=32, num_stages=2)
    _dyn[(1,)](x, 4, num_stages=2)
    _plain[(1,)](x, 4, BLOCK=64)
"""


def test_what_a_kernels_heuristics_set_is_no_knob_of_its_launches():
    """Triton's heuristics write their keys over the launch keywords: moving one measures
    nothing. Keys a call builds are unknown: then no launch option is added on the search's
    own, and the keywords the author wrote stay."""
    t = discover(HEURISTICS, "pkg/k.py").tunables
    knobs = {e.key.split("/")[-1]: set(e.knobs) for e in t.entries.values()}
    assert knobs == {
        "_lit[]": {"num_stages"},
        "_dyn[]": {"num_stages"},
        "_plain[]": {"BLOCK", "num_warps", "num_stages"},
    }
