package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// On a node, each state's DaemonSet selects the node only once the states
// before it are ready there, and each pod is created only after its
// prerequisites' pods were ready. The driver and the toolkit start side by
// side; the device plugin waits for both.
func TestChainFormsInOrderOnANode(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	node := f.nodes[0]
	for _, s := range states {
		sim.set(node, s, staysNotReady)
	}
	f.expectState("pending", "driver", node)
	g.Eventually(func() bool { return f.podOn(node, "driver") != nil && f.podOn(node, "container-toolkit") != nil },
		timeout, interval).Should(BeTrue(), "the driver and the toolkit start together")

	// The device plugin waits for the driver and for the toolkit.
	waits := func(next string, why string) {
		g.Eventually(func() int { return len(f.daemonSets(next)) }, timeout, interval).Should(Equal(1), "%s DaemonSet", next)
		// The node's labels say pending (checked before each call), and the
		// gate is the DaemonSet's affinity: this is decided, not awaited.
		g.Expect(f.daemonSetMatches(next, node)).To(BeFalse(), "%s: %s", next, why)
		g.Expect(f.podOn(node, next)).To(BeNil())
	}
	waits("device-plugin", "neither the driver nor the toolkit is ready")
	sim.set(node, "container-toolkit", becomesReady)
	f.expectState("ready", "container-toolkit", node)
	waits("device-plugin", "the driver is not ready")
	sim.set(node, "driver", becomesReady)
	f.expectState("ready", "driver", node)
	g.Eventually(func() bool { return f.podOn(node, "device-plugin") != nil }, timeout, interval).Should(BeTrue())
	for _, prereq := range []string{"driver", "container-toolkit"} {
		readyAt := readyCondition(f.podOn(node, prereq)).LastTransitionTime
		g.Expect(f.podOn(node, "device-plugin").CreationTimestamp.Before(&readyAt)).To(BeFalse(),
			"device-plugin pod created before %s was ready", prereq)
	}

	waits("dcgm-exporter", "the device plugin is not ready")
	sim.set(node, "device-plugin", becomesReady)
	f.expectState("ready", "device-plugin", node)
	// dcgm-exporter and GFD both wait for the device plugin only.
	sim.set(node, "dcgm-exporter", becomesReady)
	sim.set(node, "gpu-feature-discovery", becomesReady)
	f.expectAllReady(node)
	t.Logf("kubectl get nodes -L nvidia.com/gpu.state.*:\n%s", f.labelTable())

	cp := &gpuv1.ClusterPolicy{}
	g.Eventually(func() gpuv1.PolicyState {
		g.Expect(k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp)).To(Succeed())
		return cp.Status.State
	}, timeout, interval).Should(Equal(gpuv1.PolicyReady))
	g.Expect(cp.Status.ReadyNodes).To(Equal("1/1"))
	g.Expect(meta.IsStatusConditionTrue(cp.Status.Conditions, gpuv1.ConditionReady)).To(BeTrue())
	g.Eventually(func() []string {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(f.ctx, list)).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "ClusterPolicy" && e.Reason == "StateChanged" {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}, timeout, interval).Should(ContainElement(HavePrefix("ready: 1 of 1 GPU nodes are ready on every state")))
}

// A driver that never becomes ready on one node fails there and holds no
// other node back; the status names the node.
func TestFailingNodeHoldsNobodyBack(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 3)
	bad, good := f.nodes[0], f.nodes[1:]
	sim.set(bad, "driver", crashLoops)

	f.expectAllReady(good...)
	f.expectState("failed", "driver", bad)
	f.expectState("ready", "container-toolkit", bad)
	f.expectState("pending", "device-plugin", bad)
	g.Expect(f.podOn(bad, "device-plugin")).To(BeNil())

	cp := &gpuv1.ClusterPolicy{}
	g.Eventually(func() string {
		g.Expect(k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp)).To(Succeed())
		c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded)
		if c == nil || c.Status != "True" {
			return ""
		}
		return c.Message
	}, timeout, interval).Should(ContainSubstring("driver failed on 1 nodes: " + bad))
	g.Eventually(func() string {
		g.Expect(k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp)).To(Succeed())
		return cp.Status.ReadyNodes
	}, timeout, interval).Should(Equal("2/3"))
	g.Expect(cp.Status.State).To(Equal(gpuv1.PolicyNotReady))
	ready := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gpuv1.ReasonStateNotReady))
	g.Expect(ready.Message).To(ContainSubstring("driver is ready on 2 of 3 nodes; not ready: " + bad))
	t.Logf("kubectl get nodes -L nvidia.com/gpu.state.*:\n%s", f.labelTable())
	t.Logf("kubectl get ds -n gpu-operator -o wide:\n%s", f.daemonSetTable())
}
