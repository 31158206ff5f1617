"""Reading and rewriting tunables files: one literal changes, every other byte is kept."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from kernel_ratchet.knobs.model import KnobError
from kernel_ratchet.knobs.tunables import MODULE, parse_tunables, set_knobs
from kernel_ratchet.optimizers.testing import TOY_CONFIGS

REPO = Path(__file__).resolve().parents[2]


def _diff(a: str, b: str) -> list[str]:
    return [
        ln
        for ln in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
        if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]


def test_entries_of_a_nested_dict_with_positional_and_default_knobs():
    t = parse_tunables(TOY_CONFIGS)
    assert list(t.entries) == ["CONFIGS/fwd/large", "CONFIGS/fwd/small", "CONFIGS/bwd/large"]
    e = t.entries["CONFIGS/fwd/large"]
    assert (e.kind, e.bucket, e.cls) == ("fwd", "large", "Config")
    assert {k: v.value for k, v in e.knobs.items()} == {
        "block_m": 128,
        "block_n": 128,
        "num_warps": 8,
        "num_stages": 3,
        "persistent": False,
    }
    assert t.knob_space(e)["block_m"] == [64, 128, 256]  # "large" overrides "*"
    assert "block_m" not in t.knob_space(t.entries["CONFIGS/fwd/small"])


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"block_m": 256}, '"large": Config(256, 128, num_warps=8),  # measured: see the log'),
        ({"num_warps": 4}, '"large": Config(128, 128, num_warps=4),  # measured: see the log'),
        (
            {"persistent": True},
            '"large": Config(128, 128, num_warps=8, persistent=True),  # measured: see the log',
        ),
    ],
)
def test_rewrite_changes_one_literal_only(changes, expected):
    new = set_knobs(TOY_CONFIGS, "CONFIGS/fwd/large", changes)
    d = _diff(TOY_CONFIGS, new)
    assert len(d) == 2 and d[1][1:].strip() == expected


def test_module_constants_and_unknown_knobs():
    text = "A = 1\nBLOCK = 16  # tile\nSEARCH_SPACE = {'*': {'BLOCK': [8, 16]}}\n"
    t = parse_tunables(text)
    assert list(t.entries) == [MODULE] and list(t.entries[MODULE].knobs) == ["BLOCK"]
    assert set_knobs(text, MODULE, {"BLOCK": 8}) == text.replace("BLOCK = 16", "BLOCK = 8")
    with pytest.raises(KnobError):
        set_knobs(text, MODULE, {"A": 2})
    with pytest.raises(KnobError):
        set_knobs(text, "nope", {"BLOCK": 8})


def test_default_space_without_search_space_is_neighbours_and_flips():
    text = TOY_CONFIGS.split("SEARCH_SPACE")[0]
    t = parse_tunables(text)
    space = t.knob_space(t.entries["CONFIGS/fwd/small"])
    assert space == {
        "block_m": [16, 64],
        "block_n": [16, 64],
        "num_warps": [2, 8],
        "num_stages": [1, 4],
        "persistent": [True],
    }


def test_bundled_gemm_configs_rewrite_byte_identically():
    text = (REPO / "kernel_ratchet/kernels/gemm/configs.py").read_text()
    t = parse_tunables(text)
    assert "CONFIGS/fp8_block/large" in t.entries
    for key, knob, value in [
        ("CONFIGS/bf16/large", "num_stages", 3),
        ("CONFIGS/fp8/large", "block_n", 128),
        ("CONFIGS/bf16/tiny", "split_k", 2),
    ]:
        new = set_knobs(text, key, {knob: value})
        assert len(_diff(text, new)) == 2
        assert parse_tunables(new).entries[key].knobs[knob].value == value


FLAT = """
from dataclasses import dataclass

@dataclass
class Tile:
    block_m: int = 64
    num_warps: int = 4

BUCKETS = {
    "bf16_mm_large": Tile(128, 8),
    "fp8_mm_large": Tile(128, 8),
    "fp8_wgrad": Tile(64, 4),
}
"""


@pytest.mark.parametrize(
    ("op", "extra", "kept"),
    [
        ("grouped_bf16", "", ["bf16_mm_large"]),
        ("grouped_fp8", "", ["fp8_mm_large", "fp8_wgrad"]),
        ("moe", "", ["bf16_mm_large", "fp8_mm_large", "fp8_wgrad"]),  # no token shared: all
        ("moe", "\nSEARCH_KINDS = {'moe': ['fp8_wgrad']}\n", ["fp8_wgrad"]),
    ],
)
def test_a_flat_table_gives_an_op_the_entries_its_name_or_search_kinds_pick(op, extra, kept):
    from kernel_ratchet.knobs.tunables import entries_for_op

    t = parse_tunables(FLAT + extra)
    assert [e.bucket for e in entries_for_op(list(t.entries.values()), t, op)] == kept


TWO_TABLES = """
from dataclasses import dataclass

@dataclass
class Config:
    block_m: int = 128
    block_n: int = 128
    num_warps: int = 8

TRITON = {"fwd": {"large": Config(128, 256, num_warps=8)}}
GLUON = {"fwd": {"large": Config(128, 256)}, "bwd": {"large": Config(128, 128)}}

SEARCH_SPACE = {
    "*": {"block_m": [64, 128], "block_n": [128, 256], "num_warps": [4, 8]},
    "large": {"block_m": [64, 128, 256]},
    "GLUON": {"block_m": [], "num_warps": []},
    "GLUON/bwd/large": {"block_n": [64, 128]},
}
"""


def test_a_tuple_of_calls_is_no_entry_and_its_text_is_kept():
    """A table whose leaves are tuples of calls (the candidates a launcher chooses among) holds
    no entry for the search, and a rewrite of another entry keeps its bytes."""
    text = TWO_TABLES + '\nFITTED = {"fwd": {"skinny": (Config(128, 256), Config(128, 64))}}\n'
    t = parse_tunables(text)
    assert not [k for k in t.entries if k.startswith("FITTED")] and "TRITON/fwd/large" in t.entries
    changed = set_knobs(text, "TRITON/fwd/large", {"num_warps": 4})
    assert 'TRITON = {"fwd": {"large": Config(128, 256, num_warps=4)}}' in changed
    assert changed.endswith('\nFITTED = {"fwd": {"skinny": (Config(128, 256), Config(128, 64))}}\n')


def test_a_table_keeps_its_own_space_where_its_paths_are_another_tables():
    """Entries of two tables share the path ``fwd/large``: the variable's key and the entry's
    whole key apply to one table, and override the path keys."""
    t = parse_tunables(TWO_TABLES)
    triton, gluon = t.entries["TRITON/fwd/large"], t.entries["GLUON/fwd/large"]
    assert t.knob_space(triton) == {
        "block_m": [64, 128, 256], "block_n": [128, 256], "num_warps": [4, 8],
    }  # fmt: skip
    assert t.knob_space(gluon) == {"block_n": [128, 256]}
    assert t.knob_space(t.entries["GLUON/bwd/large"]) == {"block_n": [64, 128]}


@pytest.mark.parametrize(
    "space, named",
    [
        ("{'*': {'BLOCK': 32}}", "SEARCH_SPACE['*']['BLOCK'] is 32, not a list"),
        ("['BLOCK']", "SEARCH_SPACE is a list"),
        ("{'*': [32]}", "SEARCH_SPACE['*'] is not a dict of knobs"),
    ],
)
def test_a_search_space_not_of_its_form_names_the_part_and_the_form(space, named):
    with pytest.raises(KnobError, match=r"write SEARCH_SPACE = \{key: \{knob") as err:
        parse_tunables(f"BLOCK = 16\nSEARCH_SPACE = {space}\n")
    assert named in str(err.value)


@pytest.mark.parametrize("value, named", [("'big'", "'big' (str)"), ("64.5", "64.5 (float)")])
def test_a_search_space_value_of_another_type_than_its_knob_is_refused(value, named):
    with pytest.raises(KnobError, match=r"where BLOCK is 16 \(int\)") as err:
        parse_tunables(f"BLOCK = 16\nSEARCH_SPACE = {{'*': {{'BLOCK': [8, {value}]}}}}\n")
    assert named in str(err.value)
    assert parse_tunables("SCALE = 0.5\nSEARCH_SPACE = {'*': {'SCALE': [1, 0.25]}}\n").space
