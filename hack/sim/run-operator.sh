#!/usr/bin/env bash
# Runs bin/gpu-operator as a local process against the simulated cluster,
# authenticated with the token of the ServiceAccount the chart created, so
# that the chart's RBAC is what the operator gets. Records its pid for
# down.sh. Extra arguments are passed to the operator.
# Usage: run-operator.sh [FLAG...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
ns=${OPERATOR_NAMESPACE:-gpu-operator}
token=$("$root/bin/kubectl" --kubeconfig "$dir/kubeconfig" create token -n "$ns" gpu-operator --duration=24h)
"$root/hack/sim/token-kubeconfig.sh" "$token" "$ns" >"$dir/operator.kubeconfig"
KUBECONFIG=$dir/operator.kubeconfig OPERATOR_NAMESPACE=$ns "$root/bin/gpu-operator" \
  --metrics-bind-address=127.0.0.1:${SIM_OPERATOR_METRICS_PORT:-18080} \
  --health-probe-bind-address=127.0.0.1:${SIM_OPERATOR_PROBE_PORT:-18081} \
  --zap-encoder=console "$@" >>"$dir/logs/operator.log" 2>&1 &
echo "operator $!" >>"$dir/pids"
echo "$!"
