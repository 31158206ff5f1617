#!/usr/bin/env bash
# Job queues on the device machine that outlive one device call (a call is limited to 10
# minutes; the machine stays while calls follow each other). One queue per GPU, each job alone
# on its GPU, so timings never share a device.
#
#   bash scripts/device_batch.sh start PLAN BUDGET_S  # copy the tree to $BATCH, install it,
#                                                     # start one queue per GPU (setsid), return
#   bash scripts/device_batch.sh wait SECONDS         # follow the queues until they end or
#                                                     # SECONDS pass, then harvest into $OUT
#
# PLAN: one job per line, "GPU|NAME|TIMEOUT_S|COMMAND" ('#' starts a comment). A job runs in the
# copy with CUDA_VISIBLE_DEVICES=GPU, JOB_OUT=$BATCH/out/NAME (its files; its output goes to
# JOB_OUT/log), JOB_LIMIT (its time limit in seconds, after the budget cut) and KEEP=$BATCH/keep
# (a folder KEEP/X there comes back whole as $OUT/X.tgz at every harvest). A queue never starts
# a job past BUDGET_S from the start and cuts each job's
# timeout to what is left. Harvest: $OUT/batch.tgz (every job's folder, nvidia-smi samples,
# the status lines) and $OUT/status.txt. Plans that ran are kept under scripts/device_plans/.
set -u
BATCH=${BATCH:-/tmp/device_batch}
OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1

status() { echo "$(date -u +%H:%M:%S) $*" >> "$BATCH/status.txt"; }

queue() {  # queue GPU: run this GPU's jobs of the plan, in order
  local gpu=$1 t0 line name limit cmd left
  t0=$(cat "$BATCH/t0")
  while IFS='|' read -r g name limit cmd; do
    [[ -z "$g" || "$g" == \#* || "$g" != "$gpu" ]] && continue
    left=$(( $(cat "$BATCH/budget") - ($(date +%s) - t0) ))
    if (( left < 20 )); then status "gpu$gpu $name SKIPPED (budget spent)"; continue; fi
    (( limit > left )) && limit=$left
    mkdir -p "$BATCH/out/$name"
    status "gpu$gpu $name START (limit ${limit}s)"
    local s0 rc
    s0=$(date +%s)
    (cd "$BATCH/repo" && CUDA_VISIBLE_DEVICES=$gpu JOB_OUT="$BATCH/out/$name" JOB_LIMIT=$limit KEEP="$BATCH/keep" \
      timeout -k 10 "$limit" bash -c "$cmd") > "$BATCH/out/$name/log" 2>&1 < /dev/null
    rc=$?
    status "gpu$gpu $name END rc=$rc after $(( $(date +%s) - s0 ))s"
  done < "$BATCH/plan"
  status "gpu$gpu QUEUE DONE"
}

harvest() {
  mkdir -p "$OUT"
  cp "$BATCH/status.txt" "$OUT/status.txt" 2>/dev/null
  tar czf "$OUT/batch.tgz" -C "$BATCH" out status.txt plan 2>/dev/null
  echo "== harvested $(du -h "$OUT/batch.tgz" | cut -f1) at $(date -u +%H:%M:%S)"
  # Whole trees a job keeps under $BATCH/keep (a campaign's checkout): one pack each, taken
  # at every harvest, so a job killed at its limit still leaves its last state behind.
  for d in "$BATCH"/keep/*/; do
    [[ -d "$d" ]] || continue
    n=$(basename "$d")
    tar czf "$OUT/$n.tgz" -C "$BATCH/keep" "$n" 2>/dev/null
    echo "== kept $n: $(du -h "$OUT/$n.tgz" | cut -f1)"
  done
}

case "${1:-}" in
  start)
    plan=$2; budget=$3
    rm -rf "$BATCH"; mkdir -p "$BATCH/out" "$BATCH/keep"
    cp -a . "$BATCH/repo"; cp "$plan" "$BATCH/plan"
    echo "$budget" > "$BATCH/budget"; date +%s > "$BATCH/t0"
    # Importable from any directory (workers, example projects, focused tests): a .pth file.
    # `pip install -e .` there left kernel_ratchet unimportable outside the tree (2026-11-29).
    sp=$(python -c "import site; print(site.getsitepackages()[0])")
    echo "$BATCH/repo" > "$sp/zz_kernel_ratchet_batch.pth"
    (cd / && python -c "import kernel_ratchet; print('kernel_ratchet from', kernel_ratchet.__file__)") \
      > "$BATCH/out/install.log" 2>&1 || { cat "$BATCH/out/install.log"; exit 1; }
    { python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
      nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv
      date -u; } > "$BATCH/out/versions.txt" 2>&1
    cat "$BATCH/out/versions.txt"
    setsid nohup nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
      --format=csv -l 20 > "$BATCH/out/nvidia_smi.csv" 2>&1 < /dev/null &
    for gpu in $(cut -d'|' -f1 "$BATCH/plan" | grep -E '^[0-9]+$' | sort -u); do
      setsid nohup bash "$0" queue "$gpu" > "$BATCH/queue$gpu.log" 2>&1 < /dev/null &
    done
    sleep 2; cat "$BATCH/status.txt" ;;
  queue) queue "$2" ;;
  wait)
    end=$(( $(date +%s) + $2 )); seen=0
    trap harvest EXIT
    while (( $(date +%s) < end )); do
      n=$(wc -l < "$BATCH/status.txt"); (( n > seen )) && tail -n $(( n - seen )) "$BATCH/status.txt"; seen=$n
      queues=$(cut -d'|' -f1 "$BATCH/plan" | grep -E '^[0-9]+$' | sort -u | wc -l)
      (( $(grep -c "QUEUE DONE" "$BATCH/status.txt") >= queues )) && break
      sleep 10
    done ;;
  *) echo "usage: $0 start PLAN BUDGET_S | wait SECONDS" >&2; exit 2 ;;
esac
