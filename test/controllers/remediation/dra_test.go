package remediation

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// A GPU the DRA driver's health check taints in its ResourceSlices is
// counted and repaired as a device-plugin node's is: the node taken out of
// service, the DRA driver's plugin restarted (the repair's first step,
// which heals this one), and the node returned once its slices name every
// GPU untainted.
func TestRepairOfADRANode(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA
		cp.Spec.DRADriver.FeatureGates = map[string]bool{"NVMLDeviceHealthCheck": true}
		cp.Spec.Operator.Remediation = gpuv1.RemediationSpec{Enabled: true}
	})
	sick := "dra-repair-0"
	f.CreateNode(sick, nil)
	f.Nodes = append(f.Nodes, sick)
	f.ExpectState("ready", "dra-driver", sick)
	f.ExpectState("ready", "gpu-feature-discovery", sick)
	plugin, driver := f.PodOn(sick, "dra-driver"), f.PodOn(sick, "driver")

	f.Annotate(sick, fakenode.AnnotationUnhealthyUntil, fakenode.HealOnDevicePluginRestart)
	f.Annotate(sick, fakenode.AnnotationUnhealthyGPUs, "1")
	g.Eventually(func() string { return f.Node(sick).Annotations[gpuv1.AnnotationUnhealthyGPUs] },
		controllertest.Timeout, controllertest.Interval).Should(Equal("1"), "the tainted GPU is counted")
	g.Eventually(func() []string { return f.EventsOf(sick) }, controllertest.Timeout, controllertest.Interval).Should(
		ContainElement(ContainSubstring("as the DRA driver's device taints say: GPU-dra-repair-0-0 (gpu.nvidia.com/xid=79)")))
	f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationDone), repairTimeout)
	g.Expect(f.PodOn(sick, "dra-driver").UID).NotTo(Equal(plugin.UID), "the DRA driver's plugin was the one restarted")
	g.Expect(f.PodOn(sick, "driver").UID).To(Equal(driver.UID), "and that healed it: the driver was not reloaded")
	g.Expect(f.PodOn(sick, "device-plugin")).To(BeNil(), "and no device plugin came in its place")
	g.Expect(f.Node(sick).Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
	g.Expect(f.Node(sick).Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"))
}
