#!/usr/bin/env bash
# Stops every process hack/sim/up.sh started, by the pids it recorded, and
# removes the cluster's state.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
# running PID: the process still holds what it had open (its ports). A Go
# program's first thread can be a zombie while its other threads still
# exit, so the threads are counted, not the first one's state.
running() {
  local threads state
  threads=$(find "/proc/$1/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  ((threads > 1)) || [[ -n $state && $state != Z ]]
}
if [[ -f $dir/pids ]]; then
  # SIGKILL, all at once: the cluster's state goes with it, so no process
  # needs to shut down cleanly (kube-apiserver and etcd take more than 5 s
  # to, waiting on each other). Then wait until they are gone: the next
  # cluster may want their ports at once.
  names=() pids=()
  while read -r name pid; do
    if running "$pid"; then
      kill -9 "$pid" 2>/dev/null || true
      names+=("$name") pids+=("$pid")
    fi
  done <"$dir/pids"
  for _ in $(seq 100); do
    left=()
    for pid in "${pids[@]}"; do running "$pid" && left+=("$pid"); done
    ((${#left[@]})) || break
    sleep 0.1
  done
  ((${#left[@]} == 0)) || echo "still running 10 s after SIGKILL: ${left[*]}" >&2
  for i in "${!pids[@]}"; do echo "stopped ${names[$i]} (${pids[$i]})"; done
fi
rm -rf "$dir"
