package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// NodeGauge is a gauge with a node label whose set of nodes is replaced
// whole at each Set: a node that leaves the set leaves the metric, and a
// scrape sees one set or the next, never a set half written.
type NodeGauge struct {
	desc   *prometheus.Desc
	mu     sync.RWMutex
	values map[string]float64
}

// NewNodeGauge returns a NodeGauge named name.
func NewNodeGauge(name, help string) *NodeGauge {
	return &NodeGauge{desc: prometheus.NewDesc(name, help, []string{"node"}, nil)}
}

// Set replaces every node's value with values.
func (g *NodeGauge) Set(values map[string]float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.values = values
}

// Describe implements prometheus.Collector.
func (g *NodeGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *NodeGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for node, v := range g.values {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, node)
	}
}
