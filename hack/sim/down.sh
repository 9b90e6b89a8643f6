#!/usr/bin/env bash
# Stops every process hack/sim/up.sh started, by the pids it recorded, and
# removes the cluster's state.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
if [[ -f $dir/pids ]]; then
  # Reverse order: kwok and the controllers before the API server and etcd.
  tac "$dir/pids" | while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      echo "stopped $name ($pid)"
    fi
  done
fi
rm -rf "$dir"
