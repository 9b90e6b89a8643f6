#!/usr/bin/env bash
# Prints the kwok stage configs for the simulated cluster, comma-separated.
# The bare kwok binary has no stages; its module ships them, and they are
# used as shipped, except two: pod-ready leaves alone the pods named in
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

files=("$dir/pod-ready.yaml" "$dir/pod-complete.yaml" "$stage/pod/fast/pod-delete.yaml"
  "$stage/node/fast/node-initialize.yaml" "$stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
(IFS=,; echo "${files[*]}")
