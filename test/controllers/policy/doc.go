// Package policy tests the ClusterPolicy's lifecycle against a real kube-apiserver: a second policy, deletion and cleanup, steady state, objects of others, and uninstall. Its own envtest API server runs the operator
// (internal/test/controllertest), so the suites run side by side.
package policy
