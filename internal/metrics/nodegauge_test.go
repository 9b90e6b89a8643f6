package metrics

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
)

// unhealthySeries gathers gpu_operator_unhealthy_gpus as node -> value.
func unhealthySeries(g Gomega, reg *prometheus.Registry) map[string]float64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "gpu_operator_unhealthy_gpus" {
			continue
		}
		for _, m := range f.GetMetric() {
			g.Expect(m.GetLabel()).To(HaveLen(1))
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestNodeGaugeReplacesItsNodes(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(unhealthySeries(g, reg)).To(BeEmpty())
	m.UnhealthyGPUs.Set(map[string]float64{"gpu-1": 2, "gpu-2": 1})
	g.Expect(unhealthySeries(g, reg)).To(Equal(map[string]float64{"gpu-1": 2, "gpu-2": 1}))
	// gpu-1 healed: its series goes.
	m.UnhealthyGPUs.Set(map[string]float64{"gpu-2": 1})
	g.Expect(unhealthySeries(g, reg)).To(Equal(map[string]float64{"gpu-2": 1}))
}
