// Package mig tests MIG reconfigurations against a real kube-apiserver: the budget, apply failures and retries, and MIG devices applied again after a driver reload. Its own envtest API server runs the operator
// (internal/test/controllertest), so the suites run side by side.
package mig
