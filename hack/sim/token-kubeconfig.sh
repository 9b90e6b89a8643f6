#!/usr/bin/env bash
# Prints a kubeconfig for the simulated cluster that authenticates with a
# ServiceAccount token, so that what runs with it has that account's RBAC.
# Usage: token-kubeconfig.sh TOKEN NAMESPACE
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${SIM_DIR:-$root/_output/sim}
source "$root/hack/sim/ports.env"
cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: https://127.0.0.1:$SIM_APISERVER_PORT
    certificate-authority: $dir/pki/ca.crt
users:
- name: service-account
  user:
    token: $1
contexts:
- name: sim
  context: {cluster: sim, user: service-account, namespace: $2}
current-context: sim
KC
