package mig

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// withMIGDRAPool is withMIGPool in allocation mode dra.
func withMIGDRAPool(cp *gpuv1.ClusterPolicy) {
	withMIGPool(cp)
	cp.Spec.Driver.NodePools[0].AllocationMode = gpuv1.AllocationDRA
}

// publishedOn summarises the node's ResourceSlices of NVIDIA's GPU driver.
func publishedOn(g Gomega, f *controllertest.Fixture, node string) *draslices.Node {
	list := &resourcev1.ResourceSliceList{}
	g.Expect(suite.Client.List(f.Ctx, list, client.MatchingFields{"spec.nodeName": node})).To(Succeed())
	kept := make([]*draslices.Slice, 0, len(list.Items))
	for i := range list.Items {
		kept = append(kept, draslices.Keep(&list.Items[i]))
	}
	return draslices.Summarize(kept)
}

// A MIG configuration on a DRA pool: the node goes through the same
// reconfiguration as on a device-plugin pool, with the DRA driver as its
// GPU client; the DRA driver that comes back publishes the MIG devices,
// which the validation reads from its ResourceSlices. Back to whole GPUs
// the same way. No device plugin ever runs there.
func TestMIGOnADRAPool(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGDRAPool)
	node := "mig-dra-0"
	f.CreateNode(node, map[string]string{"gpu-type": "h200"})
	f.Nodes = append(f.Nodes, node)
	f.ExpectAllUp(node)
	f.ExpectState("ready", "dra-driver", node)
	g.Expect(publishedOn(g, f, node).WholeGPUs).To(Equal(8))
	plugin := f.PodOn(node, "dra-driver").UID
	log := recordMIG(f)
	t.Cleanup(func() {
		if t.Failed() {
			n := f.Node(node)
			t.Logf("node at the failure: labels %v\nannotations %v\nevents %v\n%s", n.Labels, n.Annotations, f.EventsOf(node), log)
		}
	})

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) })
	want := []gpuv1.MIGReconfigureState{gpuv1.MIGReconfigureRequired, gpuv1.MIGEviction, gpuv1.MIGClientsOff,
		gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone}
	g.Eventually(func() []gpuv1.MIGReconfigureState { return log.Sequence(node) }, 3*time.Minute, controllertest.Interval).
		Should(Equal(want), "%s", log)
	f.ExpectAllUp(node)
	published := publishedOn(g, f, node)
	g.Expect(published.MIGDevices).To(Equal(map[string]int{"1g.18gb": 56}), "8 GPUs of 7 MIG devices")
	g.Expect(published.WholeGPUs).To(BeZero())
	g.Expect(f.PodOn(node, "dra-driver").UID).NotTo(Equal(plugin), "the DRA driver enumerates the MIG devices at its start")
	g.Expect(f.PodOn(node, "device-plugin")).To(BeNil())
	g.Expect(f.Node(node).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-1g.18gb"))
	t.Logf("MIG reconfiguration of a DRA node:\n%s", log)

	// Back to whole GPUs.
	plugin = f.PodOn(node, "dra-driver").UID
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.NodePools[0].MIGConfig = "all-disabled" })
	g.Eventually(func() map[string]string { return f.Node(node).Annotations }, 3*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-disabled"), "%s", log)
	f.ExpectLabel(node, gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone))
	f.ExpectAllUp(node)
	published = publishedOn(g, f, node)
	g.Expect(published.WholeGPUs).To(Equal(8))
	g.Expect(published.MIGDevices).To(BeEmpty())
	g.Expect(f.PodOn(node, "dra-driver").UID).NotTo(Equal(plugin))
	g.Expect(f.Node(node).Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
	g.Expect(f.PodOn(node, "device-plugin")).To(BeNil())
}

// Issue 52, finding 3: while the DRA driver's DynamicMIG serves a node, it
// makes and destroys the MIG devices itself; the record of what
// mig-manager applied says so, and a node that leaves DynamicMIG has its
// configuration applied again before its GPU plugin serves it, evicting
// nothing, as after a reboot.
func TestMIGAppliedAgainAfterDynamicMIG(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGDRAPool, func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) })
	node := "mig-dynamic-0"
	f.CreateNode(node, map[string]string{"gpu-type": "h200"})
	f.Nodes = append(f.Nodes, node)
	t.Cleanup(func() {
		if t.Failed() {
			n := f.Node(node)
			t.Logf("node at the failure: labels %v\nannotations %v\nevents %v", n.Labels, n.Annotations, f.EventsOf(node))
		}
	})
	g.Eventually(func() map[string]string { return f.Node(node).Annotations }, 3*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-1g.18gb"))
	f.ExpectAllUp(node)
	dynamicMIG := func(on bool) func(cp *gpuv1.ClusterPolicy) {
		return func(cp *gpuv1.ClusterPolicy) { cp.Spec.DRADriver.FeatureGates = map[string]bool{"DynamicMIG": on} }
	}

	f.UpdatePolicy(dynamicMIG(true))
	g.Eventually(func() map[string]string { return f.Node(node).Annotations }, time.Minute, controllertest.Interval).
		Should(And(HaveKeyWithValue(gpuv1.AnnotationMIGAppliedUnder, gpuv1.MIGAppliedUnderDynamicMIG),
			HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-1g.18gb")), "the record kept, its devices marked the driver's")
	f.ExpectState("disabled", "mig-manager", node)
	g.Expect(f.Node(node).Labels).NotTo(HaveKey(gpuv1.LabelMIGReconfigureState))

	log := recordMIG(f)
	f.UpdatePolicy(dynamicMIG(false))
	g.Eventually(func() []gpuv1.MIGReconfigureState { return log.Sequence(node) }, 3*time.Minute, controllertest.Interval).
		Should(Equal([]gpuv1.MIGReconfigureState{gpuv1.MIGReconfigureRequired, gpuv1.MIGClientsOff, gpuv1.MIGApply,
			gpuv1.MIGValidation, gpuv1.MIGReconfigureDone}), "applied again, no eviction: %s", log)
	f.ExpectAllUp(node)
	g.Expect(f.Node(node).Annotations[gpuv1.AnnotationMIGAppliedUnder]).To(HavePrefix("boot-1/"), "made again under the node's driver")
	g.Expect(publishedOn(g, f, node).MIGDevices).To(Equal(map[string]int{"1g.18gb": 56}))
	g.Expect(f.EventsOf(node)).To(ContainElement(ContainSubstring("the MIG devices of \"all-1g.18gb\" are gone")))
}

// Issue 52, finding 3: DynamicMIG turned on while mig-manager applies a
// DRA node's configuration. The apply finishes under mig-manager, and the
// node becomes the DRA driver's after it (its record marked so); before,
// mig-manager was taken off the node in the middle of partitioning its
// GPUs. A node that was done already becomes the driver's at once, which
// says the operator has read the change.
func TestAMIGApplyUnderWayFinishesWhenDynamicMIGTurnsOn(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGDRAPool, func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) })
	done, applying := "mig-dynamic-done-0", "mig-dynamic-applying-0"
	f.CreateNode(done, map[string]string{"gpu-type": "h200"})
	f.CreateNodeWith(applying, map[string]string{"gpu-type": "h200"}, map[string]string{fakenode.AnnotationMIGApply: fakenode.MIGHang})
	f.Nodes = append(f.Nodes, done, applying)
	log := recordMIG(f)
	t.Cleanup(func() {
		if t.Failed() {
			n := f.Node(applying)
			t.Logf("node at the failure: labels %v\nannotations %v\nevents %v\n%s", n.Labels, n.Annotations, f.EventsOf(applying), log)
		}
	})
	g.Eventually(func() map[string]string { return f.Node(done).Annotations }, 3*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-1g.18gb"))
	g.Eventually(func() map[string]string { return f.Node(applying).Labels }, 3*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGApply)))
	// Its pod comes once the node controller lets mig-manager on with the
	// apply's gate, which may be after the state is read here.
	var manager *corev1.Pod
	g.Eventually(func() *corev1.Pod { manager = f.PodOn(applying, "mig-manager"); return manager }, time.Minute, controllertest.Interval).
		ShouldNot(BeNil(), "mig-manager applies")

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DRADriver.FeatureGates = map[string]bool{"DynamicMIG": true} })
	g.Eventually(func() map[string]string { return f.Node(done).Annotations }, time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.AnnotationMIGAppliedUnder, gpuv1.MIGAppliedUnderDynamicMIG), "the operator read the change")
	f.ExpectState("disabled", "mig-manager", done)
	g.Expect(f.Node(applying).Labels).To(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGApply)), "the apply goes on")
	g.Expect(f.PodOn(applying, "mig-manager")).To(HaveField("UID", manager.UID), "mig-manager stays on the node while it applies")

	f.Annotate(applying, fakenode.AnnotationMIGApply, "")
	g.Eventually(func() map[string]string { return f.Node(applying).Annotations }, time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.AnnotationMIGAppliedUnder, gpuv1.MIGAppliedUnderDynamicMIG), "%s", log)
	g.Expect(log.Sequence(applying)).To(ContainElement(gpuv1.MIGValidation), "the apply finished: %s", log)
	f.ExpectState("disabled", "mig-manager", applying)
	g.Expect(f.Node(applying).Labels).NotTo(HaveKey(gpuv1.LabelMIGReconfigureState))
	g.Expect(f.Node(applying).Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
}
