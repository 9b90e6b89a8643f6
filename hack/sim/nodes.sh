#!/usr/bin/env bash
# Prints N fake GPU nodes, as NFD would have labelled them, and one system
# node. GPU nodes carry nvidia.com/gpu capacity and the usual GPU taint; with
# N >= 4, odd nodes run RHEL 9.4 and even ones Ubuntu 22.04, so the driver
# runs one DaemonSet per OS.
# Usage: nodes.sh N
set -euo pipefail
n=$1

node() {
  local name=$1 gpu=$2 os=$3 version=$4
  cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    feature.node.kubernetes.io/system-os_release.ID: "$os"
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "$version"
YAML
  if [[ $gpu == true ]]; then
    cat <<YAML
    feature.node.kubernetes.io/pci-10de.present: "true"
spec:
  taints:
  - key: nvidia.com/gpu
    value: present
    effect: NoSchedule
YAML
  else
    echo "spec: {}"
  fi
  cat <<YAML
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"$([[ $gpu == true ]] && echo ', nvidia.com/gpu: "8"')}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"$([[ $gpu == true ]] && echo ', nvidia.com/gpu: "8"')}
  nodeInfo:
    architecture: amd64
    bootID: $(cat /proc/sys/kernel/random/uuid)
    containerRuntimeVersion: ""
    kernelVersion: ""
    kubeProxyVersion: ""
    kubeletVersion: ""
    machineID: ""
    operatingSystem: linux
    osImage: ""
    systemUUID: ""
YAML
}

node sim-system-0 false ubuntu 22.04
for ((i = 0; i < n; i++)); do
  if ((n >= 4 && i % 2 == 1)); then
    node "gpu-node-$i" true rhel 9.4
  else
    node "gpu-node-$i" true ubuntu 22.04
  fi
done
