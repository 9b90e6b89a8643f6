// Package driverpools tests the driver pools against a real kube-apiserver:
// NVIDIADriver resources (their defaults, status and upgrades) and
// precompiled driver images per kernel. Its own envtest API server runs
// the operator (internal/test/controllertest), so the suites run side by
// side; it was split from package upgrade to keep each suite's run short.
package driverpools
