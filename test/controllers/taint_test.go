package controllers

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func withReadinessTaint(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = true }

// taintsOf returns a node's taints as key:effect, but for the node
// lifecycle controller's (node.kubernetes.io/not-ready and the like, which
// come and go with the node's Ready condition).
func (f *fixture) taintsOf(node string) func() []string {
	return func() []string {
		var out []string
		for _, t := range f.node(node).Spec.Taints {
			if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				out = append(out, t.Key+":"+string(t.Effect))
			}
		}
		slices.Sort(out)
		return out
	}
}

func (f *fixture) addTaint(node string, t corev1.Taint) {
	NewWithT(f.t).Eventually(func() error {
		n := f.node(node)
		n.Spec.Taints = append(n.Spec.Taints, t)
		return k8sClient.Update(f.ctx, n)
	}, timeout, interval).Should(Succeed())
}

const (
	notReadyTaint = gpuv1.TaintGPUNotReady + ":NoSchedule"
	usersTaint    = "team:NoSchedule"
)

// The readiness taint is on a GPU node while a state is not ready there,
// after a reboot too, and goes once every state is ready; a user's taints
// stay as they are throughout.
func TestReadinessTaintUntilTheNodeIsReady(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, withReadinessTaint)
	node, other := f.nodes[0], f.nodes[1]
	sim.set(node, "dcgm-exporter", staysNotReady)
	f.addTaint(node, corev1.Taint{Key: "team", Value: "ml", Effect: corev1.TaintEffectNoSchedule})

	g.Eventually(f.taintsOf(node), timeout, interval).Should(ConsistOf(notReadyTaint, usersTaint))
	g.Expect(f.node(node).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationReadinessTaint, "true"))
	f.expectAllReady(other)
	g.Eventually(f.taintsOf(other), timeout, interval).Should(BeEmpty())
	g.Consistently(f.taintsOf(node), "2s", interval).Should(ConsistOf(notReadyTaint, usersTaint),
		"dcgm-exporter is not ready there")

	sim.set(node, "dcgm-exporter", becomesReady)
	f.expectAllReady(node)
	g.Eventually(f.taintsOf(node), timeout, interval).Should(Equal([]string{usersTaint}))
	g.Eventually(func() map[string]string { return f.node(node).Annotations }, timeout, interval).
		ShouldNot(HaveKey(gpuv1.AnnotationReadinessTaint))

	// A reboot resets the chain: the taint is back until it re-forms.
	sim.set(node, "driver", staysNotReady)
	f.setBootID(node, "boot-2")
	g.Expect(sim.restart(f.ctx, node)).To(Succeed())
	g.Eventually(f.taintsOf(node), timeout, interval).Should(ConsistOf(notReadyTaint, usersTaint))
	sim.set(node, "driver", becomesReady)
	f.expectAllReady(node)
	g.Eventually(f.taintsOf(node), timeout, interval).Should(Equal([]string{usersTaint}))
}

// Turning the option off, or deleting the policy, removes the taints the
// operator set and no other; a taint of the key on a ready node that the
// operator did not set is not the operator's to remove.
func TestReadinessTaintGoesWithTheOption(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, withReadinessTaint)
	held, ready := f.nodes[0], f.nodes[1]
	sim.set(held, "driver", staysNotReady)
	g.Eventually(f.taintsOf(held), timeout, interval).Should(Equal([]string{notReadyTaint}))
	f.expectAllReady(ready)
	g.Eventually(f.taintsOf(ready), timeout, interval).Should(BeEmpty())
	// Someone taints the ready node with the key, by hand.
	f.addTaint(ready, corev1.Taint{Key: gpuv1.TaintGPUNotReady, Effect: corev1.TaintEffectNoSchedule})

	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = false })
	g.Eventually(f.taintsOf(held), timeout, interval).Should(BeEmpty())
	g.Eventually(func() map[string]string { return f.node(held).Annotations }, timeout, interval).
		ShouldNot(HaveKey(gpuv1.AnnotationReadinessTaint))
	g.Consistently(f.taintsOf(ready), "2s", interval).Should(Equal([]string{notReadyTaint}), "not the operator's")

	// On again, then the policy goes: the held node's taint goes with it.
	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = true })
	g.Eventually(f.taintsOf(held), timeout, interval).Should(Equal([]string{notReadyTaint}))
	g.Expect(k8sClient.Delete(f.ctx, f.policy)).To(Succeed())
	g.Eventually(f.taintsOf(held), timeout, interval).Should(BeEmpty())
	g.Eventually(func() map[string]string { return f.node(held).Annotations }, timeout, interval).
		ShouldNot(HaveKey(gpuv1.AnnotationReadinessTaint))
}
