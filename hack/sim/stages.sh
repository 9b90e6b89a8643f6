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
# Image check pods are not run: pod-image-check ends them. CUDA workload
# pods are not run either: hack/simagent ends them as their node's GPUs let
# them (internal/test/fakenode, WorkloadRun).
sed "/^    matchExpressions:/a\\
    - key: '.spec.nodeName + \"/\" + (.metadata.labels[\"nvidia.com/gpu-operator.state\"] // \"\")'\\
      operator: 'NotIn'\\
      values: [$values]\\
    - key: '.metadata.labels[\"nvidia.com/gpu-operator.state\"] // \"\"'\\
      operator: 'NotIn'\\
      values: ['driver-image-check', 'cuda-workload']" "$stage/pod/fast/pod-ready.yaml" >"$dir/pod-ready.yaml"

# The simulated registry: an image whose reference holds "unpublished" is
# not in it (a kernel NVIDIA has published no precompiled driver for);
# every other image is. The operator's image check pods pull and exit, or
# wait on the pull, as a kubelet's do.
for outcome in pulled missing; do
  unpublished=false status="phase: Succeeded
      containerStatuses:
      - name: pull
        image: {{ (index .spec.containers 0).image | Quote }}
        imageID: {{ printf \"sim://%s\" (index .spec.containers 0).image | Quote }}
        ready: false
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ Now | Quote }}
            finishedAt: {{ Now | Quote }}"
  if [[ $outcome == missing ]]; then
    unpublished=true status="phase: Pending
      containerStatuses:
      - name: pull
        image: {{ (index .spec.containers 0).image | Quote }}
        ready: false
        restartCount: 0
        state:
          waiting:
            reason: ImagePullBackOff
            message: {{ printf \"Back-off pulling image %q: not found\" (index .spec.containers 0).image | Quote }}"
  fi
  cat >"$dir/pod-image-$outcome.yaml" <<STAGE
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-image-$outcome
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
      values: ['Pending']
    - key: '.metadata.labels["nvidia.com/gpu-operator.state"] // ""'
      operator: 'In'
      values: ['driver-image-check']
    - key: '.spec.containers.[0].image | contains("unpublished")'
      operator: 'In'
      values: ['$unpublished']
    - key: '(.status.containerStatuses // []) | length'
      operator: 'In'
      values: ['0']
  delay:
    durationMilliseconds: 500
  next:
    statusTemplate: |
      $status
STAGE
done

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

files=("$dir/pod-ready.yaml" "$dir/pod-ready-again.yaml" "$dir/pod-complete.yaml" "$dir/pod-image-pulled.yaml" "$dir/pod-image-missing.yaml" "$stage/pod/fast/pod-delete.yaml"
  "$stage/node/fast/node-initialize.yaml" "$stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
(IFS=,; echo "${files[*]}")
