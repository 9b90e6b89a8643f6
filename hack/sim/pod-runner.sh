#!/usr/bin/env bash
# Runs the operator's job pods (the helm chart's setup and cleanup hooks)
# for real: no container runs in the simulated cluster, so this plays the
# kubelet for them. For each such pod, it runs bin/gpu-operator with the
# pod's arguments, as the pod's ServiceAccount (so the hook's RBAC is what
# is exercised), then marks the pod Succeeded or Failed.
# Usage: pod-runner.sh (runs until killed; up.sh starts it)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
kubectl() { "$root/bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
done_file=$dir/pod-runner.done
touch "$done_file"

while sleep 1; do
  pods=$(kubectl get pods -A -l app.kubernetes.io/name=gpu-operator,app.kubernetes.io/component!=operator \
    --field-selector status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}/{.metadata.uid}{"\n"}{end}' 2>/dev/null)
  for pod in $pods; do
    grep -qx "$pod" "$done_file" && continue
    ns=${pod%%/*} rest=${pod#*/} name=${rest%%/*}
    sa=$(kubectl get pod -n "$ns" "$name" -o jsonpath='{.spec.serviceAccountName}')
    args=$(kubectl get pod -n "$ns" "$name" -o jsonpath='{range .spec.containers[0].args[*]}{@}{" "}{end}')
    token=$(kubectl create token -n "$ns" "$sa" --duration=1h)
    cfg=$dir/pod-runner.kubeconfig
    "$root/hack/sim/token-kubeconfig.sh" "$token" "$ns" >"$cfg"
    echo "running $ns/$name as $sa: gpu-operator $args" >&2
    phase=Succeeded
    # shellcheck disable=SC2086 # the pod's arguments, split as the kubelet would
    KUBECONFIG=$cfg OPERATOR_NAMESPACE=$ns "$root/bin/gpu-operator" $args >&2 || phase=Failed
    kubectl patch pod -n "$ns" "$name" --subresource=status --type=merge \
      -p "{\"status\":{\"phase\":\"$phase\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}" >/dev/null
    echo "$pod" >>"$done_file"
  done
done
