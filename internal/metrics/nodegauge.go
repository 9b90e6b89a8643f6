package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// SetGauge is a gauge whose set of series is replaced whole at each Set:
// a series that leaves the set leaves the metric, and a scrape sees one
// set or the next, never a set half written. K is a series' key; labels
// turns it into the label values, in the order of the label names.
type SetGauge[K comparable] struct {
	desc   *prometheus.Desc
	labels func(K) []string
	mu     sync.RWMutex
	values map[K]float64
}

// NodeGauge is a SetGauge with one label, node.
type NodeGauge = SetGauge[string]

// NewNodeGauge returns a NodeGauge named name.
func NewNodeGauge(name, help string) *NodeGauge {
	return NewLabelGauge(name, help, "node")
}

// NewLabelGauge returns a SetGauge with one label.
func NewLabelGauge(name, help, label string) *SetGauge[string] {
	return &SetGauge[string]{desc: prometheus.NewDesc(name, help, []string{label}, nil),
		labels: func(v string) []string { return []string{v} }}
}

// NewPairGauge returns a SetGauge with two labels, keyed by their values.
func NewPairGauge(name, help, first, second string) *SetGauge[[2]string] {
	return &SetGauge[[2]string]{desc: prometheus.NewDesc(name, help, []string{first, second}, nil),
		labels: func(k [2]string) []string { return k[:] }}
}

// Set replaces every series' value with values.
func (g *SetGauge[K]) Set(values map[K]float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.values = values
}

// Describe implements prometheus.Collector.
func (g *SetGauge[K]) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *SetGauge[K]) Collect(ch chan<- prometheus.Metric) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for k, v := range g.values {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, g.labels(k)...)
	}
}
