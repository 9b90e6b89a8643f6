package dra

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// NVIDIA's GPUCluster lies over the ClusterPolicy: a device-plugin pool
// moves to dra through the switch, the DRA driver runs with the
// GPUCluster's settings, not the policy's, and the GPUCluster says ready
// once its node serves through DRA. Deleted, it gives the pool its own
// mode back, through the switch again.
func TestGPUClusterMovesEveryPoolToDRAAndBack(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	modes := recordModes(f)

	gc := &gpuv1alpha1.GPUCluster{}
	gc.Name = gpuv1alpha1.GPUClusterName
	gc.Spec.DRADriver.Version = "v0.5.1"
	g.Expect(suite.Client.Create(f.Ctx, gc)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(suite.Client.Delete(f.Ctx, gc)) })

	onMode := func(mode gpuv1.AllocationMode) {
		t.Helper()
		g.Eventually(func() map[string]string { return f.Node(node).Labels }, 3*time.Minute, controllertest.Interval).
			Should(And(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchDone)),
				HaveKeyWithValue(gpuv1.LabelAllocationMode, string(mode))), "%s", f.LabelTable())
	}
	onMode(gpuv1.AllocationDRA)
	f.ExpectState("ready", "dra-driver", node)
	f.ExpectState("disabled", "device-plugin", node)
	images := func() []string {
		var out []string
		for _, ds := range f.DaemonSets("dra-driver") {
			for _, c := range ds.Spec.Template.Spec.Containers {
				out = append(out, c.Image)
			}
		}
		return out
	}
	g.Expect(images()).To(ContainElement(HaveSuffix("dra-driver-nvidia-gpu:v0.5.1")), "the GPUCluster's draDriver, not the policy's")
	status := func() gpuv1alpha1.GPUClusterStatus {
		got := &gpuv1alpha1.GPUCluster{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(gc), got)).To(Succeed())
		return got.Status
	}
	g.Eventually(status, controllertest.Timeout, controllertest.Interval).Should(And(
		HaveField("State", gpuv1alpha1.StateReady), HaveField("ReadyNodes", "1/1"),
		HaveField("Namespace", controllertest.Namespace)))

	g.Expect(suite.Client.Delete(f.Ctx, gc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(gc), &gpuv1alpha1.GPUCluster{}))
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue(), "no finalizer holds it")
	g.Eventually(func() string { return f.Node(node).Labels[gpuv1.LabelAllocationMode] }, 3*time.Minute, controllertest.Interval).
		Should(Equal(string(gpuv1.AllocationDevicePlugin)), "%s", f.LabelTable())
	onMode(gpuv1.AllocationDevicePlugin)
	f.ExpectAllReady(node)
	g.Expect(modes.breaches()).To(BeEmpty())
	g.Expect(modes.of(node)).To(Equal([]gpuv1.AllocationMode{gpuv1.AllocationDevicePlugin, gpuv1.AllocationNone, gpuv1.AllocationDRA,
		gpuv1.AllocationNone, gpuv1.AllocationDevicePlugin}))
	g.Eventually(images, controllertest.Timeout, controllertest.Interval).Should(BeEmpty(), "no node or pool in dra: the DRA driver goes")
}
