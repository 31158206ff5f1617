"""Hostile benchmark CSVs: huge, binary or non-finite input gets the project's errors and
valid output, in time linear in the rows."""

from __future__ import annotations

import json
import math

import pytest

from kernel_ratchet.errors import SchemaError
from kernel_ratchet.harness.csv_schema import (
    GEMM_HEADER,
    SCHEMAS,
    parse_csv_text,
    read_csv,
    write_csv,
)
from tests.cpu_time import best_cpu_seconds

GEMM = SCHEMAS["gemm"]


def _gemm_text(n: int) -> str:
    rows = (
        f"s{i},1,64,64,64,PASS,1.5,0.01,3.0,0.02,0.00035,0.00017,45.1,44.2,43.3" for i in range(n)
    )
    return "\n".join([GEMM_HEADER, *rows]) + "\n"


def _parse_seconds(text: str) -> float:
    return best_cpu_seconds(lambda: parse_csv_text(text))


def test_parse_time_grows_linearly_with_rows():
    # A quadratic step (a per-row scan of all labels) makes 4x the rows cost ~16x the time;
    # linear parsing costs ~4x. The bound leaves room for timer noise and cache contention
    # under a loaded test run (6.5x was seen on two busy cores), not for a square.
    small, large = _gemm_text(5_000), _gemm_text(20_000)
    _parse_seconds(small)  # warm up imports and caches
    ratio = _parse_seconds(large) / max(_parse_seconds(small), 1e-6)
    assert ratio < 10.0, f"4x the rows took {ratio:.1f}x the time"


def test_duplicate_labels_are_still_found_among_many_rows():
    text = _gemm_text(10_000).replace("\ns17,", "\ns3,", 1)
    with pytest.raises(SchemaError, match=r"duplicate shape label\(s\) \['s3'\]"):
        parse_csv_text(text)


def test_binary_csv_is_a_schema_error_that_says_what_to_do(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00\x10")
    with pytest.raises(SchemaError) as info:
        read_csv(path)
    msg = str(info.value)
    assert str(path) in msg
    assert "UTF-8" in msg and "byte 0" in msg
    assert "--summary-csv" in msg  # what to do: point at the CSV the harness wrote


def test_nul_byte_in_a_utf8_csv_is_a_schema_error(tmp_path):
    path = tmp_path / "bench.csv"
    row = "m64,1,64,64,64,PASS,1.5,0.01,3.0,0.02,0.00035,0.00017,45.1,44.2,43.3"
    path.write_text(f"{GEMM_HEADER}\n{row}\nm65\x00,1\n")
    with pytest.raises(SchemaError) as info:
        read_csv(path)
    msg = str(info.value)
    assert str(path) in msg and "NUL" in msg and "not text" in msg


def test_oversized_cell_is_a_schema_error():
    text = GEMM_HEADER + "\n" + "x" * 200_000 + ",1\n"
    with pytest.raises(SchemaError, match=r"<csv>:2: .*not a benchmark CSV"):
        parse_csv_text(text)


def test_a_directory_named_like_a_csv_is_a_schema_error(tmp_path):
    path = tmp_path / "bench.csv"
    path.mkdir()
    with pytest.raises(SchemaError, match="no such benchmark CSV"):
        read_csv(path)


def test_records_are_json_without_non_finite_numbers(tmp_path):
    path = tmp_path / "bench.csv"
    row = ["m64", 1, 64, 64, 64, "PASS", math.inf, 0.0, -math.inf, math.nan, 1.0, None]
    write_csv(path, GEMM, [row + [math.inf, 1.0, 2.0]])
    table = read_csv(path)
    records = table.to_records()
    text = json.dumps(records, allow_nan=False)  # raises on inf/nan
    rec = json.loads(text)[0]
    assert (rec["fwd"], rec["bwd"], rec["bwd_std"], rec["bwd_ms"]) == ("inf", "-inf", None, None)
    assert rec["fwd_std"] == 0.0 and rec["fwd_ms"] == 1.0
    assert rec["snr"] == {"out_snr": "inf", "da_snr": 1.0, "db_snr": 2.0}


def test_table_to_json_is_strict_json(tmp_path):
    path = tmp_path / "bench.csv"
    row = ["m64", 1, 64, 64, 64, "PASS", math.inf, 0.0, 1.0, 0.0, 1.0, 1.0, math.nan, 1.0, 2.0]
    write_csv(path, GEMM, [row])
    text = read_csv(path).to_json()
    assert "Infinity" not in text and "NaN" not in text
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert doc["schema"] == "gemm"
    assert doc["rows"][0]["fwd"] == "inf" and doc["rows"][0]["snr"]["out_snr"] is None
