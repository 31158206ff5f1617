#!/usr/bin/env bash
# One device call: GPU tests, benchmarks, optional sweep. Usage (repo root, on the H200):
#   bash kernel_ratchet/kernels/gemm/h200_session.sh "<bench specs>" [sweep args]
# <bench specs>: space-separated NAME=ARGS, e.g. "bf16=--dtype_bf16 tw=--dtype_fp8_--granularity_tensorwise"
# (underscores stand for spaces). CSVs go to $OUT/bench_NAME.csv, every log to $OUT/session.log
# (the device returns at most 8 files: keep one log). Budget note from 2026-11-29: compiling a
# recipe's kernels takes ~30 s of a fresh machine, then ~1 s per model shape, so a full
# 51-shape run needs BENCH_S of about 120 per recipe; TESTS_S=65 did not finish the GPU tests.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TESTS_S=${TESTS_S:-70}; BENCH_S=${BENCH_S:-60}
{ python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; date -u; } | tee "$OUT/session.log"
timeout "$TESTS_S" python -m pytest -m gpu tests/kernels/test_gemm*.py -q -n 8 -p no:cacheprovider 2>&1 \
  | tee -a "$OUT/session.log" | grep -E "passed|failed|FAILED|Error" | head -30
for spec in $1; do
  name=${spec%%=*}; args=${spec#*=}; args=${args//_/ }
  echo "== bench $name: $args"
  timeout "$BENCH_S" python -m kernel_ratchet.kernels.gemm.bench $args --shapes model --min-run-time "${MRT:-0.05}" \
    -o "$OUT/bench_$name.csv" > "$OUT/bench_$name.tmp" 2>&1
  tail -n 1 "$OUT/bench_$name.tmp"; cat "$OUT/bench_$name.tmp" >> "$OUT/session.log"; rm -f "$OUT/bench_$name.tmp"
done
if [ $# -ge 2 ]; then
  python -m kernel_ratchet.kernels.gemm.tune_h200 --out "$OUT" $2 2>&1 | tee -a "$OUT/session.log" | tail -n 20
fi
