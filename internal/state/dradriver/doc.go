// Package dradriver renders the dra-driver state: NVIDIA's DRA driver for
// GPUs (kubernetes-sigs/dra-driver-nvidia-gpu), which nodes in allocation
// mode dra run in place of the device plugin. It renders the kubelet
// plugin DaemonSet (GPUs, and compute domains when enabled), the
// compute-domain controller Deployment, the DeviceClasses claims name, the
// driver's namespaced RBAC and the admission policy that keeps each
// plugin to its own node's ResourceSlices.
//
// Every env var, mount, probe and privilege follows NVIDIA's gpu-operator
// v26.7.0 manifests/state-dra-driver, which renders the driver's v0.5.0
// image, and the driver's own source at kubernetes-sigs 95932046
// (v0.5.0-dev, the nearest to v0.5.0 that is published); where this
// package departs from NVIDIA's manifests, internal/state/contract says
// why.
package dradriver
