// Package controllertest runs the operator's controllers against a real
// kube-apiserver (envtest) for the test/controllers suites: one Suite per
// test package, with a small simulator playing the DaemonSet controller
// and the kubelets (none runs under envtest), and the Fixture each test
// uses to create its ClusterPolicy and GPU nodes and wait on what a user
// would see.
package controllertest
