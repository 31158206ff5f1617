#!/usr/bin/env bash
# Put this tree's tool code over the copy a campaign runs from (a campaign of the kernel pack in
# this repository runs with PYTHONPATH at its own checkout, which holds the tool and the kernels):
# every kernel_ratchet/**/*.py outside kernel_ratchet/kernels/, committed there on their own
# ("git commit -- FILES": a round's pending kernel edit stays as it is). Committed, not left
# uncommitted: a round refuses files outside kernel_source that changed since the last round
# closed (category "scope"). The kernels, the tests, ratchet.yaml and the campaign's records are
# not touched; the incumbent worktree keeps its commit's tool, which differs in driver code only
# when the overlay is of driver code (check the printed files). Prints the files that changed.
#
#   bash scripts/overlay_tool.sh CAMPAIGN_CHECKOUT
set -euo pipefail
dest=${1:?usage: overlay_tool.sh CAMPAIGN_CHECKOUT}
[[ -d "$dest/kernel_ratchet" ]] || { echo "no kernel_ratchet/ under $dest: not a campaign of this repository's kernel pack" >&2; exit 2; }
cd "$(dirname "$0")/.."
changed=()
while read -r f; do
  if ! cmp -s "$f" "$dest/$f"; then
    mkdir -p "$dest/$(dirname "$f")"
    cp "$f" "$dest/$f"
    echo "overlay: $f"
    changed+=("$f")
  fi
done < <(find kernel_ratchet -name '*.py' -not -path 'kernel_ratchet/kernels/*' | sort)
if (( ${#changed[@]} )); then
  rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$dest" add -- "${changed[@]}"
  git -C "$dest" commit -q -m "tool update between runs: kernel-ratchet at $rev (${#changed[@]} files)" -- "${changed[@]}"
  echo "overlay committed in $dest: $(git -C "$dest" log --oneline -1)"
fi
