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

# pod_spec NS NAME: prints the pod's ServiceAccount, then its arguments on
# one line. Fails when the pod is gone; an API error is retried, since the
# watch may not report the pod again.
pod_spec() {
  local out errors=$dir/pod-runner.err
  for _ in $(seq 30); do
    # kubectl's warnings go to stderr: kept apart from the fields.
    if out=$(kubectl get pod -n "$1" "$2" \
      -o jsonpath='{.spec.serviceAccountName}{"\n"}{range .spec.containers[0].args[*]}{@}{" "}{end}' 2>"$errors"); then
      echo "$out"
      return 0
    fi
    grep -q NotFound "$errors" && return 1
    echo "reading pod $1/$2: $(cat "$errors"); retrying" >&2
    sleep 1
  done
  return 1
}

# run_pod NS/NAME/UID: runs one job pod and marks how it ended.
run_pod() {
  local pod=$1 ns rest name spec sa args token cfg phase
  ns=${pod%%/*} rest=${pod#*/} name=${rest%%/*}
  # A pod deleted before its turn is not run.
  spec=$(pod_spec "$ns" "$name") || return 0
  sa=${spec%%$'\n'*} args=
  [[ $spec == *$'\n'* ]] && args=${spec#*$'\n'}
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
}

# A watch, not a poll: listing every pod each second cost the API server a
# scan of all its cached pods and this script a kubectl start, in every
# simulated cluster for as long as it ran (in a 1000-node rollout, 27.8 CPU
# s here and 6.5% of the API server's profile). The watch prints the
# running pods first, then each pod again as it changes or stops running;
# when the API server ends it, another starts. The pods run one at a time,
# their stdin kept off the watch's output.
while true; do
  while read -r pod; do
    [[ -n $pod ]] || continue
    grep -qx "$pod" "$done_file" && continue
    run_pod "$pod" </dev/null
  done < <(kubectl get pods -A -l app.kubernetes.io/name=gpu-operator,app.kubernetes.io/component!=operator \
    --field-selector status.phase=Running --watch \
    -o jsonpath='{.metadata.namespace}/{.metadata.name}/{.metadata.uid}{"\n"}' 2>/dev/null)
  sleep 1
done
