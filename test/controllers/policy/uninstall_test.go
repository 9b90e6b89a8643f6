package policy

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/eventtrail"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// A state label a user also applied with the operator's value is shared:
// server-side apply leaves it when the operator lets go. Deleting the
// policy used to wait for it for ever (issue 12, finding 8).
func TestUninstallCompletesWithAUsersSharedLabel(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	n := f.Nodes[0]
	key := gpuv1.StateLabel("driver")
	g.Expect(suite.Client.Apply(f.Ctx, corev1ac.Node(n).WithLabels(map[string]string{key: "ready"}),
		client.FieldOwner("an-admin"))).To(Succeed())

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	g.Expect(f.Node(n).Labels).To(HaveKeyWithValue(key, "ready"), "the admin's label stays")
	for k := range f.Node(n).Annotations {
		g.Expect(strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix)).To(BeFalse(), "node %s still has %s", n, k)
	}
}

// Deleting the policy in the middle of an upgrade lets the policy go only
// once the upgrade let go of its cordon: nothing is left cordoned.
func TestUninstallMidUpgradeUncordons(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](600)
	})
	f.ExpectAllReady(f.Nodes...)
	n := f.Nodes[0]
	f.HeldGPUPod("held", n)

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(n, gpuv1.LabelUpgradeState, string(gpuv1.UpgradePodDeletion))
	g.Expect(f.Node(n).Spec.Unschedulable).To(BeTrue())

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	node := f.Node(n)
	g.Expect(node.Spec.Unschedulable).To(BeFalse(), "the upgrade's cordon is gone before the policy")
	g.Expect(node.Labels).NotTo(HaveKey(gpuv1.LabelUpgradeState))
}

// GFD's labels leave with GFD, through NFD, before NFD goes: the cleanup
// waits while nfd-worker has not scanned GFD's removed file yet, and when
// NFD left each node, GFD's labels were gone from it (on a real node,
// nothing would remove them afterwards).
func TestUninstallLetsNFDRemoveGFDsLabelsFirst(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	f.ExpectAllReady(f.Nodes...)
	for _, n := range f.Nodes {
		g.Expect(f.Node(n).Labels).To(HaveKey("nvidia.com/gpu.product"))
		suite.Sim.HoldNFDScan(n, true)
		defer suite.Sim.HoldNFDScan(n, false)
	}

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	for _, n := range f.Nodes {
		g.Eventually(func() *corev1.Pod { return f.PodOn(n, string(state.GPUFeatureDiscovery)) },
			controllertest.Timeout, controllertest.Interval).Should(BeNil(), "GFD left node %s", n)
	}
	// GFD removed its file; NFD has not scanned it yet, and stays (over
	// two of the cleanup's looks, two seconds apart).
	g.Consistently(func(g Gomega) {
		g.Expect(f.Node(f.Nodes[0]).Labels).To(HaveKey("nvidia.com/gpu.product"))
		g.Expect(f.DaemonSets(string(state.NodeFeatureDiscovery))).NotTo(BeEmpty(), "NFD stays while GFD's labels are there")
	}, 5*time.Second, controllertest.Interval).Should(Succeed())
	for _, n := range f.Nodes {
		suite.Sim.HoldNFDScan(n, false)
	}
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	for _, n := range f.Nodes {
		g.Eventually(func() bool { return suite.Sim.NFDPublishedFor(n) }, controllertest.Timeout, controllertest.Interval).
			Should(BeFalse(), "NFD left node %s", n)
		g.Expect(suite.Sim.GFDLabelsStranded()).NotTo(ContainElement(n), "NFD left node %s with GFD's labels on it", n)
		node := f.Node(n)
		for k := range node.Labels {
			g.Expect(gfd.IsLabel(k)).To(BeFalse(), "node %s kept %s", n, k)
		}
		g.Expect(node.Annotations).NotTo(HaveKey(nfd.FeatureLabelsAnnotation))
	}
}

// GFD labels NFD published that nothing removed by the end of the wait (a
// GFD pod killed without its shutdown, its file left on the node) are
// removed by the operator where NFD is its own, and only those NFD names
// as its own; where NFD is the cluster's, they are the cluster NFD's to
// remove, and the operator says where they stay.
func TestUninstallRemovesGFDsLabelsNFDLeft(t *testing.T) {
	// What happens once the wait ends, without waiting out the suite's
	// 30 s, which is long because TestUninstallLetsNFDRemoveGFDsLabelsFirst
	// must see NFD stay for 5 s within it. 10 s (9 to 10: the deletion's
	// time is kept to the second) is time enough for the GPU node's GFD
	// pod to go and NFD to remove its labels there, a step or two of the
	// simulator after the node controller took the node's state labels
	// away (1-2 s): then the unbooted node is the only one with labels
	// left when the wait ends, as the clusters-nfd event must say.
	suite.RestartOperatorWith(t, func(tm *timers.Timers) { tm.GFDLabelsWait = 10 * time.Second })
	for name, ours := range map[string]bool{"operators-nfd": true, "clusters-nfd": false} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := suite.Setup(t, 0, func(cp *gpuv1.ClusterPolicy) { cp.Spec.NFD.Enabled = ptr.To(ours) })
			gpuNode := "gfd-left-" + name + "-gpu"
			if ours {
				f.CreateNode(gpuNode, nil)
			} else {
				f.CreateNodeWith(gpuNode, nil, map[string]string{fakenode.AnnotationNFD: "external"})
			}
			f.Nodes = append(f.Nodes, gpuNode)
			// Not booted: nothing of the simulator touches it.
			left := "gfd-left-" + name
			g.Expect(suite.Client.Create(f.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: left,
				Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8",
					"nvidia.com/gpu.family": "a-persons-own", "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel"},
				Annotations: map[string]string{nfd.FeatureLabelsAnnotation: "cpu-model.vendor_id,nvidia.com/gpu.count,nvidia.com/gpu.product"},
			}})).To(Succeed())
			t.Cleanup(func() { _ = suite.Client.Delete(f.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: left}}) })
			f.ExpectAllReady(f.Nodes...)

			g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
			g.Eventually(f.Policies, controllertest.Timeout+suite.Timers.GFDLabelsWait, controllertest.Interval).Should(BeEmpty())
			node := f.Node(left)
			g.Expect(node.Labels).To(HaveKeyWithValue("nvidia.com/gpu.family", "a-persons-own"), "NFD did not set it")
			g.Expect(node.Labels).To(HaveKey("feature.node.kubernetes.io/cpu-model.vendor_id"), "NFD's own stay")
			if ours {
				g.Expect(node.Labels).NotTo(HaveKey("nvidia.com/gpu.product"))
				g.Expect(node.Labels).NotTo(HaveKey("nvidia.com/gpu.count"))
				g.Expect(node.Annotations).To(HaveKeyWithValue(nfd.FeatureLabelsAnnotation, "cpu-model.vendor_id"))
				return
			}
			g.Expect(node.Labels).To(HaveKey("nvidia.com/gpu.product"), "the cluster's NFD removes them")
			g.Eventually(func() []string { return policyEvents(f) }, controllertest.Timeout, controllertest.Interval).
				Should(ContainElement(ContainSubstring("GFD's labels are still on 1 node(s) ("+left+")")), "events are written in the background")
		})
	}
}

// policyEvents returns the steps of the events about the fixture's policy.
func policyEvents(f *controllertest.Fixture) []string {
	list := &eventsv1.EventList{}
	NewWithT(f.T).Expect(suite.Client.List(f.Ctx, list)).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "ClusterPolicy" && e.Regarding.UID == f.Policy.UID {
			notes = append(notes, eventtrail.Steps(e.Note)...)
		}
	}
	return notes
}
