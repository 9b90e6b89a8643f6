package upgrade

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

// A precompiled NVIDIADriver runs the image built for each node's kernel.
// A node booted into a kernel NVIDIA publishes no image for keeps the
// driver it runs, and both the NVIDIADriver and the node say so; once the
// image is published, the node moves to it through the upgrade, and no
// other node is touched.
func TestPrecompiledKernelUpgradeGoesThroughTheUpgrade(t *testing.T) {
	const oldKernel, newKernel = "5.15.0-1040-azure", "5.15.0-1041-azure"
	image := func(kernel string) string { return "nvcr.io/nvidia/driver:580-" + kernel + "-ubuntu22.04" }
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true) })
	for _, n := range f.Nodes {
		f.SetLabel(n, state.LabelKernelVersion, oldKernel)
	}
	createNVIDIADriver(f, "secure-boot", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.Default, s.UsePrecompiled, s.Version = true, ptr.To(true), "580"
	})
	f.ExpectAllReady(f.Nodes...)
	for _, n := range f.Nodes {
		f.ExpectLabel(n, gpuv1.LabelDriverKernel, oldKernel)
		g.Expect(f.PodOn(n, "driver").Spec.Containers[0].Image).To(Equal(image(oldKernel)))
	}
	g.Eventually(nvidiaDriver(f, "secure-boot"), controllertest.Timeout, controllertest.Interval).Should(WithTransform(
		func(d *gpuv1alpha1.NVIDIADriver) []gpuv1alpha1.KernelImage { return d.Status.Kernels },
		Equal([]gpuv1alpha1.KernelImage{{Kernel: oldKernel, Image: image(oldKernel), Nodes: 2, State: gpuv1alpha1.ImageAvailable}})))
	deletions := recordDriverDeletions(f)
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
	f.ExpectLabel(rebooted, gpuv1.LabelUpgradeState, "upgrade-done")
	f.ExpectAllReady(f.Nodes...)
	g.Expect(f.PodOn(rebooted, "driver").Spec.Containers[0].Image).To(Equal(image(newKernel)))
	g.Expect(f.PodOn(other, "driver").Spec.Containers[0].Image).To(Equal(image(oldKernel)), "one DaemonSet per kernel")
	g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(rebooted) }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(controllertest.FullUpgrade))
	g.Expect(log.Sequence(other)).To(BeEmpty())
	count, breaches := deletions.results()
	g.Expect(breaches).To(BeEmpty(), "every driver replaced in the upgrade's step that replaces it")
	g.Expect(count).To(Equal(1), "one driver replaced, once")
}
