// Package dra tests nodes in allocation mode dra against a real
// kube-apiserver: the DRA driver's chain, GPUCluster, allocation mode
// switches and the CUDA workload proof through a ResourceClaim. Its own
// envtest API server runs the operator (internal/test/controllertest), so
// the suites run side by side; it was split from package gating to keep
// each suite's run short.
package dra
