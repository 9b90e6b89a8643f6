package mig

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// recordMIG logs the nodes' reconfiguration states; a node is out of
// service while tainted.
func recordMIG(f *controllertest.Fixture) *controllertest.StateLog[gpuv1.MIGReconfigureState] {
	return controllertest.RecordStates(f, gpuv1.LabelMIGReconfigureState, migreconfig.Tainted, func(n *corev1.Node) string {
		return fmt.Sprintf("mig.config=%s state=%s", n.Labels[gpuv1.LabelMIGConfig], n.Labels[gpuv1.LabelMIGConfigState])
	})
}

// withMIGPool puts the fixture's nodes in a driver pool of all-1g.18gb,
// migManager off until the test turns it on.
func withMIGPool(cp *gpuv1.ClusterPolicy) {
	cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{{Name: "h200", NodeSelector: map[string]gpuv1.LabelValue{"gpu-type": "h200"},
		MIGConfig: "all-1g.18gb"}}
}

// A pool's MIG configuration reaches serving nodes one at a time: each is
// tainted, its GPU pods evicted (a PodDisruptionBudget holds one back
// until it allows), its device plugin, GFD and dcgm-exporter leave,
// mig-manager applies the configuration, and the node is untainted once
// the device plugin advertises the MIG devices. The driver and the
// toolkit stay. Reapplying what is applied restarts nothing.
func TestMIGPoolReconfiguresWithinBudget(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGPool)
	for i := range 2 {
		name := fmt.Sprintf("mig-budget-%d", i)
		f.CreateNode(name, map[string]string{"gpu-type": "h200"})
		f.Nodes = append(f.Nodes, name)
	}
	f.ExpectAllReady(f.Nodes...)
	held := f.HeldGPUPod("mig-trainer", f.Nodes[0])
	driverPod, toolkitPod := f.PodOn(f.Nodes[0], "driver").UID, f.PodOn(f.Nodes[0], "container-toolkit").UID
	log := recordMIG(f)

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) })
	for _, n := range f.Nodes {
		f.ExpectLabel(n, gpuv1.LabelMIGConfig, "all-1g.18gb")
	}
	// The PDB holds the first node in its eviction (once its device plugin
	// has settled: is the layout there already?); the second waits.
	g.Eventually(func() string { return f.Node(f.Nodes[0]).Labels[gpuv1.LabelMIGReconfigureState] }, time.Minute, controllertest.Interval).
		Should(Equal(string(gpuv1.MIGEviction)))
	g.Consistently(func() string { return f.Node(f.Nodes[1]).Labels[gpuv1.LabelMIGReconfigureState] }, "3s", controllertest.Interval).
		Should(Equal(string(gpuv1.MIGReconfigureRequired)), "one node at a time")
	g.Expect(f.Node(f.Nodes[0]).Spec.Taints).To(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
	f.ExpectState("ready", "device-plugin", f.Nodes[0]) // the clients stay until the GPU pods are gone
	g.Expect(suite.Client.Delete(f.Ctx, held)).To(Succeed())

	for _, n := range f.Nodes {
		g.Eventually(func() map[string]string { return f.Node(n).Labels }, 3*time.Minute, controllertest.Interval).
			Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)), "%s\n%s", n, log)
	}
	t.Logf("MIG reconfiguration of the pool:\n%s", log)
	g.Expect(log.Peak()).To(Equal(1), "maxParallel 1:\n%s", log)
	want := []gpuv1.MIGReconfigureState{gpuv1.MIGReconfigureRequired, gpuv1.MIGEviction, gpuv1.MIGClientsOff,
		gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone}
	for _, n := range f.Nodes {
		g.Eventually(func() []gpuv1.MIGReconfigureState { return log.Sequence(n) }, controllertest.Timeout, controllertest.Interval).
			Should(Equal(want), "%s (the log's watch catches up with the reads)\n%s", n, log)
		// GFD is back after the device plugin the validation waits for.
		g.Eventually(func() map[string]string { return f.Node(n).Labels }, controllertest.Timeout, controllertest.Interval).
			Should(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-MIG-1g.18gb"))
		node := f.Node(n)
		g.Expect(node.Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
		g.Expect(node.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-1g.18gb"))
		g.Expect(node.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(56), "8 GPUs of 7 MIG devices, single strategy")
		g.Expect(f.PodOn(n, "mig-manager")).To(BeNil(), "mig-manager runs only to apply")
	}
	f.ExpectAllReady(f.Nodes...)
	g.Expect(f.PodOn(f.Nodes[0], "driver").UID).To(Equal(driverPod), "the driver stays")
	g.Expect(f.PodOn(f.Nodes[0], "container-toolkit").UID).To(Equal(toolkitPod), "the toolkit stays")
	g.Expect(f.EventsOf(f.Nodes[0])).To(ContainElement(ContainSubstring("eviction-required -> clients-off-required")))

	// The same configuration set again, by a person: nothing restarts.
	plugin := f.PodOn(f.Nodes[1], "device-plugin").UID
	f.SetLabel(f.Nodes[1], gpuv1.LabelMIGConfig, "all-1g.18gb")
	g.Consistently(func() types.UID { return podUID(f.PodOn(f.Nodes[1], "device-plugin")) }, "5s", controllertest.Interval).Should(Equal(plugin))
	g.Expect(f.Node(f.Nodes[1]).Labels[gpuv1.LabelMIGReconfigureState]).To(Equal(string(gpuv1.MIGReconfigureDone)))
}

// mig-manager's failures: one that fails once is retried with a new pod
// and succeeds; one that always fails fails the node after three
// attempts, which keeps its taint and its GPU clients off, says why on
// the node and in the policy's status, and recovers when a person names
// another configuration. A configuration the file does not hold is
// refused, naming the ones it holds, and nothing starts.
func TestMIGApplyFailuresRecover(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGPool, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.MIGManager.Enabled = ptr.To(true)
		cp.Spec.MIGManager.MaxParallel = ptr.To(intstr.FromString("100%"))
	})
	faults := []string{fakenode.MIGFailOnce, fakenode.MIGFail}
	for i, fault := range faults {
		name := fmt.Sprintf("mig-fault-%d", i)
		f.CreateNodeWith(name, map[string]string{"gpu-type": "h200"}, map[string]string{fakenode.AnnotationMIGApply: fault})
		f.Nodes = append(f.Nodes, name)
	}
	once, always := f.Nodes[0], f.Nodes[1]
	log := recordMIG(f)

	// New nodes: configured before their device plugin ever starts.
	g.Eventually(func() map[string]string { return f.Node(once).Labels }, 2*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)), "%s", log)
	f.ExpectAllReady(once)
	g.Expect(f.EventsOf(once)).To(ContainElement(And(ContainSubstring("attempt 1 of 3: mig-manager reported failed"),
		ContainSubstring("its mig-manager leaves, then attempt 2 starts"))))
	g.Expect(f.Node(once).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-1g.18gb"))

	g.Eventually(func() map[string]string { return f.Node(always).Labels }, 2*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureFailed)), "%s", log)
	f.ExpectState("failed", "mig-manager", always)
	f.ExpectState("pending", "device-plugin", always)
	g.Expect(f.Node(always).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGReason, ContainSubstring("attempt 3 of 3")))
	g.Expect(f.Node(always).Spec.Taints).To(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
	g.Eventually(func() string {
		cp := &gpuv1.ClusterPolicy{}
		_ = suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)
		for _, c := range cp.Status.Conditions {
			if c.Type == gpuv1.ConditionDegraded {
				return c.Message
			}
		}
		return ""
	}, controllertest.Timeout, controllertest.Interval).Should(And(ContainSubstring("mig-manager"), ContainSubstring(always)))

	// A name the file does not hold: refused, and the node stays failed.
	f.SetLabel(always, gpuv1.LabelMIGConfig, "all-9g.999gb")
	g.Eventually(func() []string { return f.EventsOf(always) }, controllertest.Timeout, controllertest.Interval).Should(ContainElement(And(
		ContainSubstring(`nvidia.com/mig.config names MIG configuration "all-9g.999gb"`),
		ContainSubstring("it holds: all-1g.10gb, all-1g.10gb.me, all-1g.12gb"), ContainSubstring("in all)"))))
	g.Consistently(func() string { return f.Node(always).Labels[gpuv1.LabelMIGReconfigureState] }, "2s", controllertest.Interval).
		Should(Equal(string(gpuv1.MIGReconfigureFailed)))

	// Fixed, and another configuration named: it starts over at once.
	f.Annotate(always, fakenode.AnnotationMIGApply, "")
	f.SetLabel(always, gpuv1.LabelMIGConfig, "all-disabled")
	g.Eventually(func() map[string]string { return f.Node(always).Labels }, 2*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)), "%s", log)
	f.ExpectAllReady(always)
	g.Expect(f.Node(always).Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
	g.Expect(f.Node(always).Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
	t.Logf("failures and recovery:\n%s", log)
}

func podUID(p *corev1.Pod) types.UID {
	if p == nil {
		return ""
	}
	return p.UID
}
