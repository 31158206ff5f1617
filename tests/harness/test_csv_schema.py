"""The frozen CSV schemas and the one reader (kernel_ratchet.harness.csv_schema)."""

from __future__ import annotations

import hashlib
import math

import pytest

from kernel_ratchet.errors import SchemaError
from kernel_ratchet.harness.csv_schema import (
    GEMM_HEADER,
    MEMORY_HEADER,
    SCHEMAS,
    detect_schema,
    format_cell,
    get_schema,
    parse_csv_text,
    read_csv,
    write_csv,
)

# SPEC section 5, copied by hand: the test must not derive it from the module under test.
SPEC_GEMM_HEADER = (
    "label,B,M,N,K,Check,Forward TFLOPS,Forward TFLOPS_stddev,Backward TFLOPS,"
    "Backward TFLOPS_stddev,Forward Time (ms),Backward Time (ms),out_snr,da_snr,db_snr"
)
GEMM = SCHEMAS["gemm"]
MEMORY = SCHEMAS["memory"]

GOOD_ROW = "m64,1,64,64,64,PASS,1.5,0.01,3.0,0.02,0.00035,0.00017,45.1,44.2,43.3"
MEM_ROW = "r1024,1,1024,4096,PASS,800.0,5.0,,,0.042,,60.0"


def gemm_text(*rows: str, header: str = SPEC_GEMM_HEADER) -> str:
    return "\n".join([header, *rows]) + "\n"


def test_gemm_header_is_the_spec_string_byte_for_byte():
    assert GEMM_HEADER.encode() == SPEC_GEMM_HEADER.encode()
    assert get_schema("gemm").header == SPEC_GEMM_HEADER


def test_memory_header_keeps_label_check_and_stddev_convention():
    cols = MEMORY_HEADER.split(",")
    assert cols[0] == "label" and "Check" in cols
    assert cols[cols.index("Forward GB/s") + 1] == "Forward GB/s_stddev"
    assert cols[cols.index("Backward GB/s") + 1] == "Backward GB/s_stddev"


def test_header_sha256_is_stable_and_matches_the_header_bytes():
    expected = hashlib.sha256(SPEC_GEMM_HEADER.encode()).hexdigest()
    assert GEMM.header_sha256 == expected
    assert get_schema("gemm").header_sha256 == expected
    assert MEMORY.header_sha256 != GEMM.header_sha256


def test_get_schema_unknown_name_lists_known():
    with pytest.raises(SchemaError, match=r"'gemm'.*'memory'"):
        get_schema("attention")


def test_write_then_read_round_trip(tmp_path):
    path = tmp_path / "sub" / "bench.csv"
    rows = [
        ["a", 1, 64, 32, 16, "PASS", 1.25, 0.125, 2.5, 0.25, 0.5, 0.75, 41.5, math.inf, 39.0],
        ["b", 4, 8, 8, 8, "FAIL", None, math.nan, None, None, None, None, -math.inf, None, 3.0],
    ]
    write_csv(path, GEMM, rows)
    assert path.read_text().splitlines()[0] == SPEC_GEMM_HEADER
    table = read_csv(path, expected=GEMM)
    assert table.schema is GEMM
    a, b = table.rows
    assert (a.label, a.B, a.M, a.N, a.K, a.check) == ("a", 1, 64, 32, 16, "PASS")
    assert (a.fwd, a.fwd_std, a.bwd, a.bwd_std, a.fwd_ms, a.bwd_ms) == (
        1.25,
        0.125,
        2.5,
        0.25,
        0.5,
        0.75,
    )
    assert a.snr == {"out_snr": 41.5, "da_snr": math.inf, "db_snr": 39.0}
    assert a.passed and not b.passed
    assert (b.label, b.B, b.check) == ("b", 4, "FAIL")
    assert math.isnan(b.fwd) and math.isnan(b.fwd_std) and math.isnan(b.bwd_ms)
    assert b.snr["out_snr"] == -math.inf and math.isnan(b.snr["da_snr"])
    assert list(table.by_label()) == ["a", "b"]
    assert not list(tmp_path.glob("sub/*.tmp")), "write_csv left its temp file behind"


def test_write_keeps_significant_digits_of_tiny_cpu_values(tmp_path):
    path = tmp_path / "b.csv"
    write_csv(path, GEMM, [["t", 1, 2, 2, 2, "PASS", 1.234567e-6, 0, "", "", 1, "", 1, 2, 3]])
    assert read_csv(path).rows[0].fwd == pytest.approx(1.234567e-6, rel=1e-5)
    assert format_cell(1.234567e-6) == "1.23457e-06"
    assert format_cell(None) == "" and format_cell(math.nan) == ""


def test_write_rejects_row_of_wrong_length(tmp_path):
    with pytest.raises(SchemaError, match="14 cells"):
        write_csv(tmp_path / "x.csv", GEMM, [["a", 1, 2, 3, 4, "PASS", 1, 2, 3, 4, 5, 6, 7, 8]])


def test_empty_cells_read_as_nan():
    t = parse_csv_text(gemm_text("e,1,2,3,4,PASS,1.0,,,,,,,,"))
    r = t.rows[0]
    assert r.fwd == 1.0
    for v in (r.fwd_std, r.bwd, r.bwd_std, r.fwd_ms, r.bwd_ms, *r.snr.values()):
        assert math.isnan(v)
    assert t.to_records()[0]["bwd"] is None


def test_memory_schema_is_detected():
    t = parse_csv_text("\n".join([MEMORY_HEADER, MEM_ROW]) + "\n")
    assert t.schema.name == "memory"
    r = t.rows[0]
    assert (r.label, r.B, r.M, r.N, r.K) == ("r1024", 1, 1024, 4096, 0)
    assert (r.fwd, r.fwd_std, r.fwd_ms) == (800.0, 5.0, 0.042)
    assert math.isnan(r.bwd)
    assert r.snr == {"out_snr": 60.0}
    assert detect_schema(GEMM_HEADER) is GEMM
    assert detect_schema(MEMORY_HEADER) is MEMORY


def test_expected_schema_pins_a_memory_csv_read_as_gemm(tmp_path):
    path = tmp_path / "mem.csv"
    path.write_text("\n".join([MEMORY_HEADER, MEM_ROW]) + "\n")
    assert read_csv(path).schema.name == "memory"
    with pytest.raises(SchemaError, match="'gemm'") as exc:
        read_csv(path, expected=GEMM)
    msg = str(exc.value)
    assert str(path) in msg
    assert "Forward TFLOPS" in msg and "Forward GB/s" in msg


def test_one_renamed_column_names_missing_and_unexpected():
    header = SPEC_GEMM_HEADER.replace("Forward TFLOPS_stddev", "Forward TFLOPS_std")
    with pytest.raises(SchemaError) as exc:
        parse_csv_text(gemm_text(GOOD_ROW, header=header), expected=GEMM)
    msg = str(exc.value)
    assert "Missing column(s): ['Forward TFLOPS_stddev']" in msg
    assert "Unexpected column(s): ['Forward TFLOPS_std']" in msg
    # Detection (no expected schema) reports against the closest schema, the GEMM one.
    with pytest.raises(SchemaError, match=r"Missing column\(s\): \['Forward TFLOPS_stddev'\]"):
        parse_csv_text(gemm_text(GOOD_ROW, header=header))


def test_reordered_columns_are_an_error():
    cols = SPEC_GEMM_HEADER.split(",")
    cols[1], cols[2] = cols[2], cols[1]
    with pytest.raises(SchemaError, match="another order") as exc:
        parse_csv_text(gemm_text(GOOD_ROW, header=",".join(cols)))
    assert "Missing" not in str(exc.value) and SPEC_GEMM_HEADER in str(exc.value)


def test_missing_column_is_named():
    header = SPEC_GEMM_HEADER.replace(",db_snr", "")
    row = GOOD_ROW.rsplit(",", 1)[0]
    with pytest.raises(SchemaError, match=r"Missing column\(s\): \['db_snr'\]") as exc:
        parse_csv_text(gemm_text(row, header=header))
    assert "Unexpected" not in str(exc.value)


def test_extra_column_is_named():
    with pytest.raises(SchemaError, match=r"Unexpected column\(s\): \['notes'\]") as exc:
        parse_csv_text(gemm_text(GOOD_ROW + ",hi", header=SPEC_GEMM_HEADER + ",notes"))
    assert "Missing" not in str(exc.value)


def test_trailing_whitespace_in_header_is_drift():
    with pytest.raises(SchemaError):
        parse_csv_text(gemm_text(GOOD_ROW, header=SPEC_GEMM_HEADER + " "))


@pytest.mark.parametrize("row", [GOOD_ROW + ",1", GOOD_ROW.rsplit(",", 1)[0]], ids=["16", "14"])
def test_row_with_wrong_cell_count_names_line(row):
    with pytest.raises(SchemaError, match=r"<csv>:3: 1[46] cells, the schema has 15"):
        parse_csv_text(gemm_text(GOOD_ROW.replace("m64", "ok"), row))


@pytest.mark.parametrize("check", ["pass", "OK", "", "FAILED"])
def test_check_other_than_pass_or_fail(check):
    row = GOOD_ROW.replace(",PASS,", f",{check},")
    with pytest.raises(SchemaError, match=r"<csv>:2: Check is .*PASS or FAIL"):
        parse_csv_text(gemm_text(row))


def test_non_numeric_cell_names_column_and_value():
    row = GOOD_ROW.replace(",1.5,", ",fast,")
    with pytest.raises(SchemaError, match=r"<csv>:2: column 'Forward TFLOPS' holds 'fast'"):
        parse_csv_text(gemm_text(row))


def test_non_numeric_dimension_is_an_error():
    row = GOOD_ROW.replace("m64,1,64", "m64,1,sixty")
    with pytest.raises(SchemaError, match="column 'M'"):
        parse_csv_text(gemm_text(row))


def test_duplicate_labels_are_named():
    with pytest.raises(SchemaError, match=r"duplicate shape label\(s\) \['m64'\]"):
        parse_csv_text(gemm_text(GOOD_ROW, GOOD_ROW.replace("m64", "other"), GOOD_ROW))


def test_empty_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(SchemaError, match="empty CSV") as exc:
        read_csv(path)
    assert str(path) in str(exc.value)


def test_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(SchemaError, match="--summary-csv"):
        read_csv(tmp_path / "nope.csv")


def test_byte_order_mark_is_an_error(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + gemm_text(GOOD_ROW).encode())
    with pytest.raises(SchemaError, match="byte-order mark") as exc:
        read_csv(path, expected=GEMM)
    assert str(path) in str(exc.value)
    with pytest.raises(SchemaError, match="byte-order mark"):
        parse_csv_text("\ufeff" + gemm_text(GOOD_ROW))


def test_crlf_line_endings_parse():
    t = parse_csv_text(gemm_text(GOOD_ROW).replace("\n", "\r\n"), expected=GEMM)
    assert t.rows[0].label == "m64" and t.rows[0].snr["db_snr"] == 43.3


def test_header_only_gives_no_rows():
    assert parse_csv_text(SPEC_GEMM_HEADER + "\n").rows == ()


def test_restrict_keeps_the_asked_labels_in_order():
    from kernel_ratchet.harness.csv_schema import GEMM_HEADER, parse_csv_text

    rows = "".join(f"s{i},1,8,8,8,PASS,1,0,,,1,,50,,\n" for i in range(3))
    t = parse_csv_text(GEMM_HEADER + "\n" + rows)
    assert [r.label for r in t.restrict(["s2", "missing", "s0"]).rows] == ["s2", "s0"]
    assert t.restrict(["s1"]).schema is t.schema
