// Package remediation tests the repair of unhealthy GPUs against a real kube-apiserver, and the budget repairs share with driver upgrades. Its own envtest API server runs the operator
// (internal/test/controllertest), so the suites run side by side.
package remediation
