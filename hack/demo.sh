#!/usr/bin/env bash
# make demo: a simulated GPU cluster on 127.0.0.1, the chart installed with
# the documented command, the operator running as a local process with its
# own ServiceAccount's token, and a live view of the rollout until every
# node is ready. Run `make demo-down` to stop it all.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
nodes=${NODES:-4}
export KUBECONFIG=$root/_output/sim/kubeconfig
kubectl() { "$root/bin/kubectl" "$@"; }
states=nvidia.com/gpu.state.driver,nvidia.com/gpu.state.container-toolkit,nvidia.com/gpu.state.device-plugin,nvidia.com/gpu.state.dcgm-exporter,nvidia.com/gpu.state.gpu-feature-discovery

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Simulated cluster: $nodes fake GPU nodes (etcd, kube-apiserver, controller-manager, scheduler, kwok)"
hack/sim/down.sh >/dev/null
hack/sim/up.sh "$nodes"

step "helm install gpu-operator deployments/gpu-operator -n gpu-operator --create-namespace --set driver.enabled=true --set driver.version=535.154.05"
bin/helm install gpu-operator deployments/gpu-operator -n gpu-operator --create-namespace \
  --set driver.enabled=true --set driver.version=535.154.05 >/dev/null
echo "installed; the setup hook applied the CRDs and labelled the namespace"

step "Starting the operator as a local process, as the gpu-operator ServiceAccount (logs: _output/sim/logs/operator.log)"
hack/sim/run-operator.sh >/dev/null

view() {
  kubectl get nodes -L "$states"
  echo
  kubectl get clusterpolicy
}

step "Rollout, refreshed every 2 s until every node is ready"
deadline=$((SECONDS + 300))
while :; do
  ready=$(kubectl get clusterpolicy cluster-policy -o jsonpath='{.status.state}' 2>/dev/null)
  screen=$(view)
  [[ -t 1 ]] && printf '\033[H\033[2J'
  printf '%s\n' "$screen"
  [[ $ready == ready ]] && break
  if ((SECONDS > deadline)); then
    echo "not ready after 5 minutes; see _output/sim/logs/operator.log" >&2
    exit 1
  fi
  sleep 2
done

cat <<EOT

Every GPU node is ready, state by state. Try it yourself:

  export KUBECONFIG=$KUBECONFIG
  bin/kubectl get nodes -L $states
  bin/kubectl get ds -n gpu-operator
  bin/kubectl edit clusterpolicy cluster-policy     # e.g. set dcgmExporter.enabled: false
  hack/sim/reboot.sh gpu-node-1                     # a reboot: the chain resets and re-forms in order
  bin/kubectl get events --field-selector involvedObject.name=gpu-node-1
  bin/kubectl patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"version":"575.57.08"}}}'
  bin/kubectl get nodes -L nvidia.com/gpu-driver-upgrade-state,nvidia.com/gpu.driver-version -w
                                                    # a new driver, rolled out node by node
  bin/helm uninstall gpu-operator -n gpu-operator   # removes every operator label and object

Stop everything with: make demo-down
EOT
