package clusterpolicy

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// BenchmarkStatus is the ClusterPolicy status of a fleet mid-rollout, as
// each reconcile computes it from the cached nodes: the summary of every
// node's state labels, the metrics exported from it and the status built.
// A tenth of the nodes are on their way (the device plugin pending, the
// later states with it), a hundredth failed on the driver, and the
// driver upgrade's labels are on every node (issue 54 measured this part
// at 18% of the operator's CPU late in a 5000-node rollout). Kept, every
// node's share is the one kept from the reconcile before, as for the nodes
// that did not change since; fresh, each is read anew. Run with
// go test ./internal/controller/clusterpolicy -run '^$' -bench Status -benchmem.
func BenchmarkStatus(b *testing.B) {
	g, err := registry.Graph()
	if err != nil {
		b.Fatal(err)
	}
	cp := testPolicy.DeepCopy()
	enabled := g.Enabled(&cp.Spec)
	for _, bench := range []struct {
		size int
		kept bool
	}{{1000, true}, {1000, false}, {5000, true}, {5000, false}} {
		size, kind := bench.size, "fresh"
		if bench.kept {
			kind = "kept"
		}
		b.Run(fmt.Sprintf("%d nodes, %s", size, kind), func(b *testing.B) {
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			r := &Reconciler{Graph: g, Namespace: "gpu-operator", Metrics: m}
			nodes := make([]corev1.Node, size)
			for i := range nodes {
				rd, p := gpuv1.StateReady, gpuv1.StatePending
				n := ready(fmt.Sprintf("gpu-%04d", i))
				upgrade := gpuv1.UpgradeDone
				switch {
				case i%100 == 0:
					n = gpuNode(n.Name, gpuv1.StateFailed)
					upgrade = gpuv1.UpgradeFailed
				case i%10 == 0:
					n = gpuNode(n.Name, rd, rd, p, p, p)
					upgrade = gpuv1.UpgradeValidation
				}
				n.Labels[gpuv1.LabelUpgradeState] = string(upgrade)
				n.Labels[gpuv1.LabelDriverPool] = fmt.Sprintf("pool-%d", i%4)
				n.ResourceVersion = "1"
				nodes[i] = n
			}
			ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(size), NumberReady: int32(size)}}
			b.ReportAllocs()
			perNode := g.PerNode()
			l := listed(nodes)
			for b.Loop() {
				if !bench.kept {
					r.shares = shares{}
				}
				s := summarizeShares(g, enabled, l, r.shares.of(g, perNode, l), ds)
				r.export(s)
				_ = buildStatus(cp, r.Namespace, s, problems{})
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(size), "µs/node")
		})
	}
}
