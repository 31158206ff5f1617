"""The prepared-weight step table (``python -m kernel_ratchet.kernels.gemm.prepared_bench``) on
the interpreter: its rows, its check that both FP8 steps give the same bits, and its exit
status when they do not. The timings themselves mean something on a GPU only."""

from __future__ import annotations

import dataclasses

from kernel_ratchet.kernels.gemm import prepared_bench as pb

ARGV = ["--shapes", "cpu", "--limit", "1", "--min-run-time", "0.001", "--rounds", "2"]


def test_the_table_times_three_steps_and_checks_the_bits(tmp_path, capsys):
    out = tmp_path / "tables" / "prepared.md"
    assert pb.main([*ARGV, "-o", str(out)]) == 0, capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert lines[0] == pb.HEADER
    (row,) = [x for x in lines if x.startswith("| m32.n32.k128 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-1] == "same bits" and all(float(c) > 0 for c in cells[4:10])
    assert lines[-1].startswith("1/1 shapes with the same bits both ways; geomean")


def test_a_prepared_weight_that_changes_the_bits_fails_the_table(monkeypatch, capsys):
    """Copies taken from another weight (here: twice the real one, the guard fooled) change
    the step's output: the row says so and the command exits 1."""
    real = pb.prepare_weight

    def doubled(b):
        p = real(b * 2)
        return dataclasses.replace(p, data_ptr=b.data_ptr(), version=b._version)

    monkeypatch.setattr(pb, "prepare_weight", doubled)
    assert pb.main(ARGV) == 1
    out = capsys.readouterr().out
    assert "| DIFFERENT |" in out and "0/1 shapes with the same bits" in out
