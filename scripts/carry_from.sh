#!/usr/bin/env bash
# Prepare .carry/ (ignored through .git/info/exclude) for a device plan that continues the work
# of an earlier lease (scripts/device_plans/resume-6.plan): the campaign packs the harvest
# brought back ($OUT/camp_*.tgz) and the sweep JSONs inside its batch.tgz.
#
#   bash scripts/carry_from.sh /work/.device/N [/work/.device/M ...]   # later harvests win
#
# Then call the device with carry: [".carry"].
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx "/.carry/" .git/info/exclude 2>/dev/null || echo "/.carry/" >> .git/info/exclude
mkdir -p .carry
for d in "$@"; do
  for f in "$d"/camp_*.tgz; do [[ -f "$f" ]] && cp "$f" .carry/ && echo "carry $(basename "$f") from $d"; done
  if [[ -f "$d/batch.tgz" ]]; then
    tmp=$(mktemp -d)
    tar xzf "$d/batch.tgz" -C "$tmp" --wildcards 'out/sweep_*/sweep_*.json' 2>/dev/null || true
    for f in "$tmp"/out/sweep_*/sweep_*.json; do
      [[ -f "$f" ]] && cp "$f" .carry/ && echo "carry $(basename "$f") from $d/batch.tgz"
    done
    rm -rf "$tmp"
  fi
done
du -sh .carry
