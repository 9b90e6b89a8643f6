package upgrade

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// nfdLabel is NFD's label of an NVIDIA PCI device, which the fixture's
// nodes carry.
const nfdLabel = "feature.node.kubernetes.io/pci-10de.present"

// A node held in its upgrade's eviction by a PodDisruptionBudget loses
// NFD's label, as when nfd-master restarts, and gets it back (issue 52,
// finding 1). Throughout, it stays cordoned in its upgrade state with its
// driver and its GPU pod; nobody else takes its place in the budget. Once
// the budget is lifted, its upgrade finishes.
func TestNFDLabelFlapEndsNoUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
	f.ExpectAllReady(f.Nodes...)
	held, other := f.Nodes[0], f.Nodes[1]
	pdb := f.HeldGPUPod("training", held)
	driver := f.PodOn(held, "driver")
	log := f.RecordUpgrades()

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(held, gpuv1.LabelUpgradeState, string(gpuv1.UpgradePodDeletion))
	labels := f.Node(held).Labels

	f.SetLabel(held, nfdLabel, "")
	g.Eventually(func() map[string]string { return f.Node(held).Annotations }, controllertest.Timeout, controllertest.Interval).
		Should(HaveKey(gating.AnnotationNFDLostSince))
	f.AfterMaintenancePasses()
	n := f.Node(held)
	g.Expect(n.Spec.Unschedulable).To(BeTrue(), "still cordoned")
	for k, v := range labels {
		if k != nfdLabel {
			g.Expect(n.Labels).To(HaveKeyWithValue(k, v), "label %s kept", k)
		}
	}
	g.Expect(f.PodOn(held, "driver").UID).To(Equal(driver.UID), "the driver stays")
	g.Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: "workloads", Name: "training"}, &corev1.Pod{})).
		To(Succeed(), "the GPU pod stays")
	g.Expect(f.Node(other).Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeRequired)),
		"the held node keeps its place in the budget")
	g.Eventually(func() []string { return f.EventsOf(held) }, controllertest.Timeout, controllertest.Interval).
		Should(ContainElement(ContainSubstring("NFD's labels of an NVIDIA GPU are gone")))

	f.SetLabel(held, nfdLabel, "true")
	g.Eventually(func() map[string]string { return f.Node(held).Annotations }, controllertest.Timeout, controllertest.Interval).
		ShouldNot(HaveKey(gating.AnnotationNFDLostSince))
	g.Expect(suite.Client.Delete(f.Ctx, pdb)).To(Succeed())
	for _, node := range f.Nodes {
		f.ExpectUpgraded(log, node)
	}
	g.Expect(log.Sequence(held)).To(Equal(controllertest.FullUpgrade), "one upgrade, never forgotten")
}
