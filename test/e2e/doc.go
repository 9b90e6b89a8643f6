// Package e2e holds the end-to-end specs (build tag e2e) that run against
// the simulated cluster of hack/sim: the real DaemonSet controller and
// scheduler, kwok's fake kubelets, the chart installed with helm, and the
// operator running as a local process with its ServiceAccount's token.
package e2e
