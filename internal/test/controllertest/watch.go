package controllertest

import (
	"context"
	"sync"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// LabelValues records, from a watch, every value a node's label took. A
// check that a label never left a value reads this history: polling it
// could miss a change shorter than its Interval.
type LabelValues struct {
	mu     sync.Mutex
	values []string
}

func (f *Fixture) WatchLabel(node, key string) *LabelValues {
	h := &LabelValues{}
	f.WatchNodes(func(n *corev1.Node) { h.record(n.Labels[key]) }, client.MatchingFields{"metadata.name": node})
	return h
}

// WatchNodes calls see with every version of the nodes opts select, in
// the order the API server stored them, until the test ends or the
// returned cancel is called.
func (f *Fixture) WatchNodes(see func(*corev1.Node), opts ...client.ListOption) context.CancelFunc {
	ctx, cancel := context.WithCancel(f.Ctx)
	f.T.Cleanup(cancel)
	w, err := f.s.WatchClient.Watch(ctx, &corev1.NodeList{}, opts...)
	if err != nil {
		f.T.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				see(n)
			}
		}
	}()
	return cancel
}

func (h *LabelValues) record(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.values) == 0 || h.values[len(h.values)-1] != v {
		h.values = append(h.values, v)
	}
}

// Seen returns the distinct values in the order they came.
func (h *LabelValues) Seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values...)
}

// Reconciled waits until the policy controller has applied (and pruned
// for) the policy's current generation: what it does for a change is done
// once the status says so.
func (f *Fixture) Reconciled() {
	f.T.Helper()
	g := NewWithT(f.T)
	g.Eventually(func(g Gomega) {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(f.s.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		g.Expect(cp.Status.ObservedGeneration).To(Equal(cp.Generation))
	}, Timeout, Interval).Should(Succeed())
}

// WatchOwnNodes calls see with every version of the test's own nodes
// (f.Nodes), as WatchNodes does: the server holds other tests' nodes too.
func (f *Fixture) WatchOwnNodes(see func(*corev1.Node)) context.CancelFunc {
	own := map[string]bool{}
	for _, n := range f.Nodes {
		own[n] = true
	}
	return f.WatchNodes(func(n *corev1.Node) {
		if own[n.Name] {
			see(n)
		}
	})
}
