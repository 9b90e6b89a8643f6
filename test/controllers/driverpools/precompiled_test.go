package driverpools

import (
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// precompiledNodes sets up two GPU nodes booting kernel under a default
// NVIDIADriver of precompiled branch 580 images, every driver ready.
func precompiledNodes(t *testing.T, kernel string) *controllertest.Fixture {
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true) })
	for _, n := range f.Nodes {
		f.SetLabel(n, state.LabelKernelVersion, kernel)
	}
	createNVIDIADriver(f, "secure-boot", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.Default, s.UsePrecompiled, s.Version = true, ptr.To(true), "580"
	})
	f.ExpectAllReady(f.Nodes...)
	return f
}

// A precompiled NVIDIADriver runs the image built for each node's kernel.
// A node booted into a kernel NVIDIA publishes no image for keeps the
// driver it runs, and both the NVIDIADriver and the node say so; once the
// image is published, the node moves to it through the upgrade, and no
// other node is touched.
func TestPrecompiledKernelUpgradeGoesThroughTheUpgrade(t *testing.T) {
	const oldKernel, newKernel = "5.15.0-1040-azure", "5.15.0-1041-azure"
	image := func(kernel string) string { return "nvcr.io/nvidia/driver:580-" + kernel + "-ubuntu22.04" }
	g := NewWithT(t)
	f := precompiledNodes(t, oldKernel)
	for _, n := range f.Nodes {
		f.ExpectLabel(n, gpuv1.LabelDriverKernel, oldKernel)
		g.Expect(f.PodOn(n, "driver").Spec.Containers[0].Image).To(Equal(image(oldKernel)))
	}
	g.Eventually(nvidiaDriver(f, "secure-boot"), controllertest.Timeout, controllertest.Interval).Should(WithTransform(
		func(d *gpuv1alpha1.NVIDIADriver) []gpuv1alpha1.KernelImage { return d.Status.Kernels },
		Equal([]gpuv1alpha1.KernelImage{{Kernel: oldKernel, Image: image(oldKernel), Nodes: 2, State: gpuv1alpha1.ImageAvailable}})))
	deletions := f.RecordDriverDeletions()
	log := f.RecordUpgrades()

	// The node boots a kernel whose image is not published.
	rebooted, other := f.Nodes[0], f.Nodes[1]
	running := f.PodOn(rebooted, "driver").UID
	suite.Sim.SetImageMissing(image(newKernel), true)
	t.Cleanup(func() { suite.Sim.SetImageMissing(image(newKernel), false) })
	f.SetLabel(rebooted, state.LabelKernelVersion, newKernel)
	g.Eventually(func() string {
		d := nvidiaDriver(f, "secure-boot")()
		c := apimeta.FindStatusCondition(d.Status.Conditions, gpuv1alpha1.ConditionError)
		if c == nil || len(d.Status.Kernels) == 0 {
			return ""
		}
		return c.Reason + " " + d.Status.Kernels[0].Kernel + " " + d.Status.Kernels[0].State
	}, controllertest.Timeout, controllertest.Interval).Should(Equal(gpuv1alpha1.ReasonPrecompiledImageMissing + " " +
		newKernel + " " + gpuv1alpha1.ImageMissing))
	g.Expect(f.PodOn(rebooted, "driver").UID).To(Equal(running), "the node keeps the driver it runs")
	g.Expect(f.Node(rebooted).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverKernel, oldKernel))

	// Published: the node moves to it, through the upgrade.
	suite.Sim.SetImageMissing(image(newKernel), false)
	f.ExpectLabel(rebooted, gpuv1.LabelDriverKernel, newKernel)
	f.ExpectUpgraded(log, rebooted)
	f.ExpectAllReady(f.Nodes...)
	g.Expect(f.PodOn(rebooted, "driver").Spec.Containers[0].Image).To(Equal(image(newKernel)))
	g.Expect(f.PodOn(other, "driver").Spec.Containers[0].Image).To(Equal(image(oldKernel)), "one DaemonSet per kernel")
	g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(rebooted) }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(controllertest.FullUpgrade))
	g.Expect(log.Sequence(other)).To(BeEmpty())
	count, breaches := deletions.Results()
	g.Expect(breaches).To(BeEmpty(), "every driver replaced in the upgrade's step that replaces it")
	g.Expect(count).To(Equal(1), "one driver replaced, once")
}

// A new branch is a new image for every kernel: until a pull of it
// succeeded, each kernel's DaemonSet stays as it is (a driver pod deleted
// meanwhile comes back from the image that runs), and once it did, every
// node moves to it through the upgrade.
func TestPrecompiledBranchWaitsForItsImages(t *testing.T) {
	const kernel = "5.15.0-1040-azure"
	image := func(branch string) string { return "nvcr.io/nvidia/driver:" + branch + "-" + kernel + "-ubuntu22.04" }
	g := NewWithT(t)
	f := precompiledNodes(t, kernel)
	deletions := f.RecordDriverDeletions()
	log := f.RecordUpgrades()

	suite.Sim.SetImageMissing(image("590"), true)
	t.Cleanup(func() { suite.Sim.SetImageMissing(image("590"), false) })
	nvd := nvidiaDriver(f, "secure-boot")()
	nvd.Spec.Version = "590"
	g.Expect(suite.Client.Update(f.Ctx, nvd)).To(Succeed())
	g.Eventually(func() []gpuv1alpha1.KernelImage { return nvidiaDriver(f, "secure-boot")().Status.Kernels },
		controllertest.Timeout, controllertest.Interval).Should(ContainElement(And(
		HaveField("Image", image("590")), HaveField("State", gpuv1alpha1.ImageMissing))))
	// The policy has rendered, and the maintenance looked at the fleet,
	// on the missing image.
	f.AfterPasses("clusterpolicy", "maintenance")
	var images []string
	for _, ds := range f.DaemonSets("driver") {
		images = append(images, ds.Spec.Template.Spec.Containers[0].Image)
	}
	g.Expect(images).To(Equal([]string{image("580")}), "kept as it is")
	for _, n := range f.Nodes {
		g.Expect(f.PodOn(n, "driver").OwnerReferences).NotTo(BeEmpty(), "node %s: its driver pod is still its DaemonSet's", n)
	}
	// A driver pod a person deletes comes back from the image that runs.
	deleted := f.PodOn(f.Nodes[0], "driver")
	g.Expect(suite.Client.Delete(f.Ctx, deleted)).To(Succeed())
	g.Eventually(func() string {
		p := f.PodOn(f.Nodes[0], "driver")
		if p == nil || p.UID == deleted.UID {
			return ""
		}
		return p.Spec.Containers[0].Image
	}, controllertest.Timeout, controllertest.Interval).Should(Equal(image("580")))
	f.ExpectAllReady(f.Nodes...)
	for _, n := range f.Nodes {
		g.Expect(log.Sequence(n)).To(BeEmpty(), "node %s entered the upgrade towards an image nobody pulled", n)
	}

	suite.Sim.SetImageMissing(image("590"), false)
	for _, n := range f.Nodes {
		f.ExpectUpgraded(log, n)
		g.Eventually(func() string { return f.PodOn(n, "driver").Spec.Containers[0].Image },
			controllertest.Timeout, controllertest.Interval).Should(Equal(image("590")))
	}
	f.ExpectAllReady(f.Nodes...)
	g.Expect(log.Peak()).To(Equal(1), "within the budget")
	count, breaches := deletions.Results()
	g.Expect(breaches).To(HaveLen(1), "the person's deletion, outside the upgrade")
	g.Expect(count).To(Equal(3))
}
