// Package dcgmexporter renders the dcgm-exporter state: the DCGM exporter
// DaemonSet, which serves GPU metrics for Prometheus.
package dcgmexporter
