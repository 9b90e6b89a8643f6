// Package metrics defines the operator's Prometheus metrics, all named
// gpu_operator_*. They are registered on a registry the caller passes, so
// tests can use their own.
package metrics
