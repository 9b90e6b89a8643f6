// Package gating tests the per-node gating of the states against a real kube-apiserver: chains forming in order, outages and reboots, opt-outs, real-node variants and the readiness taint. Its own envtest API server runs the operator
// (internal/test/controllertest), so the suites run side by side.
package gating
