#!/usr/bin/env bash
# Stops every process hack/sim/up.sh started, by the pids it recorded, and
# removes the cluster's state.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
if [[ -f $dir/pids ]]; then
  # All at once: the cluster's state goes with it, so no process needs
  # another to shut down cleanly. Those not gone within 5s are killed.
  live=()
  while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      live+=("$name:$pid")
    fi
  done <"$dir/pids"
  for _ in $(seq 50); do
    left=()
    for p in "${live[@]}"; do kill -0 "${p#*:}" 2>/dev/null && left+=("$p"); done
    ((${#left[@]})) || break
    sleep 0.1
  done
  for p in "${live[@]}"; do
    kill -9 "${p#*:}" 2>/dev/null || true
    echo "stopped ${p%%:*} (${p#*:})"
  done
fi
rm -rf "$dir"
