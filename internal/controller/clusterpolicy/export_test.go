package clusterpolicy

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
)

// series gathers a metric family from reg as its label values joined by
// "/" -> value.
func series(g Gomega, reg *prometheus.Registry, name string) map[string]float64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += "/"
				}
				key += l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The metrics the chart's alerts and dashboard read: the first state not
// ready per node, the pools' counts, and the operations holding nodes.
func TestExportForAlerts(t *testing.T) {
	g := NewWithT(t)
	p, r := gpuv1.StatePending, gpuv1.StateReady
	broken := gpuNode("broken", p)
	halfway := gpuNode("halfway", r, r, p)
	halfway.Labels[gpuv1.LabelDriverPool] = "a100"
	halfway.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeFailed)
	healed := gpuNode("healed", p)
	healed.Labels[gpuv1.LabelRemediationState] = string(gpuv1.RemediationDone)
	s := testSummary(t, []corev1.Node{broken, halfway, healed}, nil)

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	g.Expect(err).NotTo(HaveOccurred())
	(&Reconciler{Metrics: m}).export(s)

	g.Expect(series(g, reg, "gpu_operator_node_not_ready")).To(Equal(map[string]float64{
		"broken/driver": 1, "halfway/device-plugin": 1, "healed/driver": 1}))
	g.Expect(series(g, reg, "gpu_operator_pool_gpu_nodes")).To(Equal(map[string]float64{"default": 2, "a100": 1}))
	g.Expect(series(g, reg, "gpu_operator_pool_ready_nodes")).To(Equal(map[string]float64{"default": 0, "a100": 0}))
	g.Expect(series(g, reg, "gpu_operator_maintenance_nodes")).To(Equal(map[string]float64{"upgrade/upgrade-failed": 1}),
		"a repair done holds nothing")

	// The broken node recovers: its series leaves.
	for _, name := range []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"} {
		broken.Labels[gpuv1.StateLabel(name)] = string(r)
	}
	s = testSummary(t, []corev1.Node{broken}, nil)
	(&Reconciler{Metrics: m}).export(s)
	g.Expect(series(g, reg, "gpu_operator_node_not_ready")).NotTo(HaveKey(HavePrefix("broken/")))
}
