#!/usr/bin/env bash
# Simulates a reboot of GPU nodes: a new boot ID, and every pod on the node
# that had not ended restarting the way a kubelet restarts them after a
# boot (not ready, then ready again, which kwok's pod-ready stage does).
# Usage: hack/sim/reboot.sh NODE...
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
kubectl() { "$root/bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
for node in "$@"; do
  kubectl patch node "$node" --subresource=status --type=merge \
    -p "{\"status\":{\"nodeInfo\":{\"bootID\":\"$(cat /proc/sys/kernel/random/uuid)\"}}}" >/dev/null
  # A kubelet runs again after a boot the pods that were running; pods
  # that ended (a CUDA workload proof that succeeded) stay ended.
  for pod in $(kubectl get pods -A --field-selector "spec.nodeName=$node,status.phase!=Succeeded,status.phase!=Failed" -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}'); do
    kubectl patch pod -n "${pod%%/*}" "${pod#*/}" --subresource=status --type=merge \
      -p '{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}],"podIP":null,"podIPs":null}}' >/dev/null 2>&1 || true
  done
  echo "rebooted $node"
done
