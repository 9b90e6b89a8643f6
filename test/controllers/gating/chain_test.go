package gating

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/eventtrail"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// On a node, each state's DaemonSet selects the node only once the
// states before it are ready there, and each pod is created only after
// its prerequisites' pods were ready: the driver, then the toolkit, then
// the device plugin.
func TestChainFormsInOrderOnANode(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	for _, s := range controllertest.States {
		suite.Sim.Set(node, s, controllertest.StaysNotReady)
	}
	f.ExpectState("pending", "driver", node)
	g.Eventually(func() *corev1.Pod { return f.PodOn(node, "driver") }, controllertest.Timeout, controllertest.Interval).ShouldNot(BeNil())

	waits := func(next string, why string) {
		g.Eventually(func() int { return len(f.DaemonSets(next)) }, controllertest.Timeout, controllertest.Interval).Should(Equal(1), "%s DaemonSet", next)
		// The node's labels say pending (checked before each call), and the
		// gate is the DaemonSet's affinity: this is decided, not awaited.
		g.Expect(f.DaemonSetMatches(next, node)).To(BeFalse(), "%s: %s", next, why)
		g.Expect(f.PodOn(node, next)).To(BeNil())
	}
	waits("container-toolkit", "the driver is not ready")
	waits("device-plugin", "neither the driver nor the toolkit is ready")
	suite.Sim.Set(node, "driver", controllertest.BecomesReady)
	f.ExpectState("ready", "driver", node)
	g.Eventually(func() *corev1.Pod { return f.PodOn(node, "container-toolkit") }, controllertest.Timeout, controllertest.Interval).ShouldNot(BeNil())
	waits("device-plugin", "the toolkit is not ready")
	suite.Sim.Set(node, "container-toolkit", controllertest.BecomesReady)
	f.ExpectState("ready", "container-toolkit", node)
	g.Eventually(func() bool { return f.PodOn(node, "device-plugin") != nil }, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	for _, order := range [][2]string{{"container-toolkit", "driver"}, {"device-plugin", "driver"}, {"device-plugin", "container-toolkit"}} {
		readyAt := controllertest.ReadyCondition(f.PodOn(node, order[1])).LastTransitionTime
		g.Expect(f.PodOn(node, order[0]).CreationTimestamp.Before(&readyAt)).To(BeFalse(),
			"%s pod created before %s was ready", order[0], order[1])
	}

	waits("dcgm-exporter", "the device plugin is not ready")
	suite.Sim.Set(node, "device-plugin", controllertest.BecomesReady)
	f.ExpectState("ready", "device-plugin", node)
	// dcgm-exporter and GFD both wait for the device plugin only.
	suite.Sim.Set(node, "dcgm-exporter", controllertest.BecomesReady)
	suite.Sim.Set(node, "gpu-feature-discovery", controllertest.BecomesReady)
	f.ExpectAllReady(node)
	t.Logf("kubectl get nodes -L nvidia.com/gpu.state.*:\n%s", f.LabelTable())

	cp := &gpuv1.ClusterPolicy{}
	g.Eventually(func() gpuv1.PolicyState {
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		return cp.Status.State
	}, controllertest.Timeout, controllertest.Interval).Should(Equal(gpuv1.PolicyReady))
	g.Expect(cp.Status.ReadyNodes).To(Equal("1/1"))
	g.Expect(meta.IsStatusConditionTrue(cp.Status.Conditions, gpuv1.ConditionReady)).To(BeTrue())
	g.Eventually(func() []string {
		list := &eventsv1.EventList{}
		g.Expect(suite.Client.List(f.Ctx, list)).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "ClusterPolicy" && e.Reason == "StateChanged" {
				notes = append(notes, eventtrail.Steps(e.Note)...)
			}
		}
		return notes
	}, controllertest.Timeout, controllertest.Interval).Should(ContainElement(HavePrefix("ready: 1 of 1 GPU nodes are ready on every state")))
}

// A driver that never becomes ready on one node fails there and holds no
// other node back; the status names the node.
func TestFailingNodeHoldsNobodyBack(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 3)
	bad, good := f.Nodes[0], f.Nodes[1:]
	suite.Sim.Set(bad, "driver", controllertest.CrashLoops)

	f.ExpectAllReady(good...)
	f.ExpectState("failed", "driver", bad)
	f.ExpectState("pending", "container-toolkit", bad)
	f.ExpectState("pending", "device-plugin", bad)
	g.Expect(f.PodOn(bad, "container-toolkit")).To(BeNil(), "the toolkit starts after the driver")
	g.Expect(f.PodOn(bad, "device-plugin")).To(BeNil())

	cp := &gpuv1.ClusterPolicy{}
	g.Eventually(func() string {
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded)
		if c == nil || c.Status != "True" {
			return ""
		}
		return c.Message
	}, controllertest.Timeout, controllertest.Interval).Should(ContainSubstring("driver failed on 1 nodes: " + bad))
	g.Eventually(func() string {
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		return cp.Status.ReadyNodes
	}, controllertest.Timeout, controllertest.Interval).Should(Equal("2/3"))
	g.Expect(cp.Status.State).To(Equal(gpuv1.PolicyNotReady))
	ready := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gpuv1.ReasonStateNotReady))
	g.Expect(ready.Message).To(ContainSubstring("driver is ready on 2 of 3 nodes; not ready: " + bad))
	t.Logf("kubectl get nodes -L nvidia.com/gpu.state.*:\n%s", f.LabelTable())
	t.Logf("kubectl get ds -n gpu-operator -o wide:\n%s", f.DaemonSetTable())
}
