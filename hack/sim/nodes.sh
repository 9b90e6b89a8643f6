#!/usr/bin/env bash
# Prints N fake GPU nodes, as NFD would have labelled them, one system node,
# and one node of each kind named in SIM_NODE_KINDS. GPU nodes carry the
# usual GPU taint and no nvidia.com/gpu: their GPUs appear once the device
# plugin runs (hack/simagent). With N >= 4, odd nodes run RHEL 9.4 on
# containerd 1.7, which reports no runtime handlers, and even ones Ubuntu
# 22.04 on containerd 2.1, which does; so the driver runs one DaemonSet per
# OS, and both ways of proving the toolkit are exercised.
#
# Usage: nodes.sh N
# Env:   SIM_NODE_KINDS: comma-separated kinds of extra GPU nodes, one each:
#          host-driver  (gpu-host-driver: the host runs NVIDIA driver 550.54.15)
#          crio         (gpu-crio: CRI-O 1.31)
#          k3s          (gpu-k3s: k3s's containerd, config and socket under k3s's paths)
#          unconfigured (gpu-unconfigured: its runtime never loads the NVIDIA handler)
#          gke-cos      (gpu-cos: GKE's Container-Optimized OS: Google's driver in
#                        /home/kubernetes/bin/nvidia, /usr read-only, the driver
#                        container opted out with nvidia.com/gpu.deploy.driver=false)
#          kubelet-root (gpu-kubelet-root: the kubelet's root is /data/kubelet)
#          fabric-manager-down (gpu-fabric-manager-down: 8 GPUs on NVSwitch whose
#                        Fabric Manager died: nvidia-smi answers, CUDA cannot
#                        start, error 802)
set -euo pipefail
n=$1

# kernel OS prints the kernel NFD finds on a node of the OS.
kernel() {
  case $1 in
    rhel) echo "5.14.0-427.37.1.el9_4.x86_64" ;;
    *) echo "5.15.0-1040-azure" ;;
  esac
}

# node NAME GPU OS VERSION RUNTIME [ANNOTATION=VALUE | label:LABEL=VALUE...]
node() {
  local name=$1 gpu=$2 os=$3 version=$4 runtime=$5
  shift 5
  cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
YAML
  for a in "$@"; do
    [[ $a == label:* ]] && continue
    echo "    ${a%%=*}: \"${a#*=}\""
  done
  cat <<YAML
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    feature.node.kubernetes.io/system-os_release.ID: "$os"
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "$version"
    feature.node.kubernetes.io/kernel-version.full: "$(kernel "$os")"
YAML
  for a in "$@"; do
    [[ $a == label:* ]] || continue
    a=${a#label:}
    echo "    ${a%%=*}: \"${a#*=}\""
  done
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
  # containerd 2.x (and CRI-O) report their runtime handlers from the
  # kubelet's first status on; containerd 1.7 reports none.
  local handlers="[{name: \"\"}, {name: runc}]"
  [[ " $* " == *"runtime=legacy"* ]] && handlers="[]"
  cat <<YAML
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  runtimeHandlers: $handlers
  nodeInfo:
    architecture: amd64
    bootID: $(cat /proc/sys/kernel/random/uuid)
    containerRuntimeVersion: "$runtime"
    kernelVersion: "$(kernel "$os")"
    kubeProxyVersion: ""
    kubeletVersion: ""
    machineID: ""
    operatingSystem: linux
    osImage: ""
    systemUUID: ""
YAML
}

sim=sim.gpu-operator.io
node sim-system-0 false ubuntu 22.04 containerd://2.1.4
for ((i = 0; i < n; i++)); do
  if ((n >= 4 && i % 2 == 1)); then
    node "gpu-node-$i" true rhel 9.4 containerd://1.7.27 "$sim/runtime=legacy"
  else
    node "gpu-node-$i" true ubuntu 22.04 containerd://2.1.4
  fi
done
for kind in $(echo "${SIM_NODE_KINDS:-}" | tr , " "); do
  case $kind in
    host-driver) node gpu-host-driver true ubuntu 22.04 containerd://2.1.4 "$sim/host-driver=550.54.15" ;;
    crio) node gpu-crio true rhel 9.4 cri-o://1.31.0 ;;
    k3s) node gpu-k3s true ubuntu 22.04 containerd://2.0.5-k3s1 \
      "$sim/containerd-config=/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl" \
      "$sim/containerd-socket=/run/k3s/containerd/containerd.sock" ;;
    unconfigured) node gpu-unconfigured true ubuntu 22.04 containerd://2.1.4 "$sim/runtime=never-configured" ;;
    gke-cos) node gpu-cos true cos 121 containerd://2.0.4 "$sim/driver-dir=/home/kubernetes/bin/nvidia" \
      "$sim/read-only-usr=true" "label:nvidia.com/gpu.deploy.driver=false" ;;
    kubelet-root) node gpu-kubelet-root true ubuntu 22.04 containerd://2.1.4 "$sim/kubelet-root=/data/kubelet" ;;
    fabric-manager-down) node gpu-fabric-manager-down true ubuntu 22.04 containerd://2.1.4 "$sim/gpus=8" "$sim/fabric-manager=down" ;;
    *) echo "unknown node kind $kind (host-driver, crio, k3s, unconfigured, gke-cos, kubelet-root, fabric-manager-down)" >&2; exit 1 ;;
  esac
done
