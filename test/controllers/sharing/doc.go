// Package sharing tests device plugin configurations per node and per pool against a real kube-apiserver: time-slicing, refused configurations, MPS. Its own envtest API server runs the operator
// (internal/test/controllertest), so the suites run side by side.
package sharing
