#!/usr/bin/env bash
# Prints the kwok stage configs for the simulated cluster, comma-separated.
# The bare kwok binary has no stages; its module ships them, and they are
# used as shipped, except two, and one is added (pod-ready-again, below):
# pod-ready leaves alone the pods named in
# NOT_READY (comma-separated node/state pairs): a driver that never loads,
# or a driver pod whose check finds the host's driver, which hack/simagent
# answers; pod-complete leaves the operator's own jobs to pod-runner.sh.
# Usage: stages.sh DIR NOT_READY
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/hack/versions.env"
dir=$1 not_ready=${2:-}
mkdir -p "$dir"
mod=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION
[[ -d $mod ]] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION" >/dev/null 2>&1 || true
[[ -d $mod ]] || { echo "kwok $KWOK_VERSION is not in the module cache: run make tools-sim" >&2; exit 1; }
stage=$mod/kustomize/stage

values="'none'"
if [[ -n $not_ready ]]; then
  values=$(echo "$not_ready" | tr ',' '\n' | sed "s#.*#'&'#" | paste -sd, -)
fi
# The selector key is a jq expression on the pod: its node and state.
sed "/^    matchExpressions:/a\\
    - key: '.spec.nodeName + \"/\" + (.metadata.labels[\"nvidia.com/gpu-operator.state\"] // \"\")'\\
      operator: 'NotIn'\\
      values: [$values]" "$stage/pod/fast/pod-ready.yaml" >"$dir/pod-ready.yaml"

# The operator's own job pods (helm hooks) are run for real, by
# hack/sim/pod-runner.sh, which completes them itself.
sed "/^    matchExpressions:/a\\
    - key: '.metadata.labels[\"app.kubernetes.io/name\"] // \"\"'\\
      operator: 'NotIn'\\
      values: ['gpu-operator']" "$stage/pod/fast/pod-complete.yaml" >"$dir/pod-complete.yaml"

# A kubelet sets a running pod Ready again once its node is back after the
# node lifecycle controller marked it not ready (its lease lapsed under
# load); kwok does not, so without this stage such a pod stays not ready
# for ever. Ours: the pods NOT_READY names are left alone here too.
cat >"$dir/pod-ready-again.yaml" <<STAGE
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "ContainersReady" ) | .status'
      operator: 'In'
      values: ['True']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
    - key: '.spec.nodeName + "/" + (.metadata.labels["nvidia.com/gpu-operator.state"] // "")'
      operator: 'NotIn'
      values: [$values]
  delay:
    durationMilliseconds: 1000
  next:
    statusTemplate: |
      conditions:
      {{ range .status.conditions }}
      - type: {{ .type | Quote }}
        {{ if eq .type "Ready" }}
        status: "True"
        lastTransitionTime: {{ Now | Quote }}
        {{ else }}
        status: {{ .status | Quote }}
        lastTransitionTime: {{ .lastTransitionTime | Quote }}
        {{ end }}
      {{ end }}
STAGE

files=("$dir/pod-ready.yaml" "$dir/pod-ready-again.yaml" "$dir/pod-complete.yaml" "$stage/pod/fast/pod-delete.yaml"
  "$stage/node/fast/node-initialize.yaml" "$stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
(IFS=,; echo "${files[*]}")
