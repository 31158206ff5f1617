#!/usr/bin/env bash
# One device call: GPU tests, benchmarks, optional sweep. Usage (repo root, on the H200):
#   bash kernel_ratchet/kernels/gemm/h200_session.sh "<bench specs>" [sweep args]
# <bench specs>: space-separated NAME=ARGS, e.g. "bf16=--dtype_bf16 tw=--dtype_fp8_--granularity_tensorwise"
# (underscores stand for spaces). Logs and CSVs go to $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TESTS_S=${TESTS_S:-70}; BENCH_S=${BENCH_S:-60}
{ python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; date -u; } | tee "$OUT/env.txt"
timeout "$TESTS_S" python -m pytest -m gpu tests/kernels/test_gemm*.py -q -n 8 -p no:cacheprovider 2>&1 \
  | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|FAILED|Error" | head -30
for spec in $1; do
  name=${spec%%=*}; args=${spec#*=}; args=${args//_/ }
  echo "== bench $name: $args"
  timeout "$BENCH_S" python -m kernel_ratchet.kernels.gemm.bench $args --shapes model --min-run-time "${MRT:-0.05}" \
    -o "$OUT/bench_$name.csv" > "$OUT/bench_$name.log" 2>&1
  tail -n 1 "$OUT/bench_$name.log"
done
if [ $# -ge 2 ]; then
  python -m kernel_ratchet.kernels.gemm.tune_h200 --out "$OUT" $2 2>&1 | tail -n 20
fi
