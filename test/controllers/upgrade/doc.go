// Package upgrade tests driver upgrades against a real kube-apiserver: the budget, evictions, restarts mid-upgrade, and every driver replacement going through the upgrade. Its own envtest API server runs the operator
// (internal/test/controllertest), so the suites run side by side.
package upgrade
