package maintenance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// fixedNodes lists one prebuilt fleet, the same objects at every look, as
// the informer cache hands out its own (cacheconfig.CachedNodes).
type fixedNodes []*corev1.Node

func (f fixedNodes) ListNodes(context.Context) ([]*corev1.Node, error) { return slices.Clone(f), nil }

// BenchmarkLook is one look of the maintenance controller at a fleet late
// in a driver rollout: every node upgrade-required on an outdated driver
// pod, the pool's one place of maxUnavailable taken by a failed node, so
// that each look judges every node, admits none and writes nothing. It is
// the cost the look cache cuts (issue 54, item 1): these nodes are quiet,
// and an incremental look takes their view and step from the cache; a full
// one judges each again, as every look did before. Run with
// go test ./internal/controller/maintenance -run '^$' -bench Look -benchmem.
func BenchmarkLook(b *testing.B) {
	for _, bench := range []struct {
		size int
		full bool
	}{{1000, false}, {1000, true}, {5000, false}, {5000, true}} {
		size, kind := bench.size, "incremental"
		if bench.full {
			kind = "full"
		}
		b.Run(fmt.Sprintf("%d nodes, %s", size, kind), func(b *testing.B) {
			g := NewWithT(b)
			ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
			cp := driverPolicy(g)
			cp.Spec.Operator.Remediation.Enabled = true
			cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
			nodes := make([]corev1.Node, size)
			objs := []client.Object{cp, newDriverDaemonSet()}
			pods := make([]corev1.Pod, size)
			for i := range nodes {
				name := fmt.Sprintf("gpu-%04d", i)
				st := gpuv1.UpgradeRequired
				if i == 0 {
					st = gpuv1.UpgradeFailed
				}
				n := gpuNode(name, map[string]string{
					gpuv1.LabelUpgradeState:                      string(st),
					gpuv1.StateLabel(string(state.Driver)):       string(gpuv1.StateReady),
					gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateReady),
				}, map[string]string{AnnotationSince: since})
				n.Spec.Unschedulable = i == 0
				n.ResourceVersion = "1"
				nodes[i] = *n
				objs = append(objs, n.DeepCopy())
				pods[i] = *outdatedDriver(name)
			}
			c := fakeAPI(objs...).Build()
			graph, err := registry.Graph()
			g.Expect(err).NotTo(HaveOccurred())
			m, err := metrics.New(prometheus.NewRegistry())
			g.Expect(err).NotTo(HaveOccurred())
			listed := make(fixedNodes, size)
			for i := range nodes {
				listed[i] = &nodes[i]
			}
			r := &Reconciler{Client: c, Nodes: listed, APIReader: c, Pods: podindex.Fixed(b, pods...),
				Graph: graph, Namespace: fixture.Namespace, Recorder: &events.FakeRecorder{}, Metrics: m,
				Timers: fixture.Timers(), TrimNode: cacheconfig.NewNodeTrimmer().Node}
			// The first look writes each node's waiting reason; the
			// cache then holds what it wrote.
			_, err = r.Reconcile(ctx, ctrl.Request{})
			g.Expect(err).NotTo(HaveOccurred())
			list := &corev1.NodeList{}
			g.Expect(c.List(ctx, list)).To(Succeed())
			g.Expect(list.Items[1].Annotations).To(HaveKey(gpuv1.AnnotationMaintenanceWaiting), "every queued node is told why it waits")
			copy(nodes, list.Items)
			r.written = writes{}

			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if bench.full {
					r.looks = lookCache{}
				}
				if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(size), "µs/node")
		})
	}
}
