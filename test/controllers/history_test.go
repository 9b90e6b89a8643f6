package controllers

import (
	"context"
	"sync"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// labelValues records, from a watch, every value a node's label took. A
// check that a label never left a value reads this history: polling it
// could miss a change shorter than its interval.
type labelValues struct {
	mu     sync.Mutex
	values []string
}

func (f *fixture) watchLabel(node, key string) *labelValues {
	h := &labelValues{}
	f.watchNodes(func(n *corev1.Node) { h.record(n.Labels[key]) }, client.MatchingFields{"metadata.name": node})
	return h
}

// watchNodes calls see with every version of the nodes opts select, in
// the order the API server stored them, until the test ends or the
// returned cancel is called.
func (f *fixture) watchNodes(see func(*corev1.Node), opts ...client.ListOption) context.CancelFunc {
	ctx, cancel := context.WithCancel(f.ctx)
	f.t.Cleanup(cancel)
	w, err := watchClient.Watch(ctx, &corev1.NodeList{}, opts...)
	if err != nil {
		f.t.Fatal(err)
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

func (h *labelValues) record(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.values) == 0 || h.values[len(h.values)-1] != v {
		h.values = append(h.values, v)
	}
}

// seen returns the distinct values in the order they came.
func (h *labelValues) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values...)
}

// reconciled waits until the policy controller has applied (and pruned
// for) the policy's current generation: what it does for a change is done
// once the status says so.
func (f *fixture) reconciled() {
	f.t.Helper()
	g := NewWithT(f.t)
	g.Eventually(func(g Gomega) {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp)).To(Succeed())
		g.Expect(cp.Status.ObservedGeneration).To(Equal(cp.Generation))
	}, timeout, interval).Should(Succeed())
}
