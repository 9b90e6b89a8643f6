//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// DRAGPUClusterSpec applies NVIDIA's GPUCluster sample, as it is, over the
// chart's ClusterPolicy of DRASpec: the device-plugin nodes move to DRA
// through their switches, never both plugins on a node, and the DRA driver
// runs the image the GPUCluster names. Its status counts the nodes that
// serve through DRA and names the one that cannot (the simulated cluster's
// node whose driver never gets ready). Deleted, it gives the pools their
// own modes back: the device-plugin nodes switch back, and the DRA pool's
// node stays.
func DRAGPUClusterSpec(ctx context.Context, in DRAInput) {
	data, err := os.ReadFile(filepath.Join(root, "test", "crd", "testdata", "nvidia-gpucluster.yaml"))
	Expect(err).NotTo(HaveOccurred())
	gc := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(data, &gc.Object)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, gc))).To(Succeed()) })

	tl := watchSwitch(ctx, append([]string{in.DRA}, in.DevicePlugin...)...)
	defer func() { AddReportEntry("GPUCluster timeline", tl.String()) }()
	defer tl.stop()
	onMode := func(mode gpuv1.AllocationMode, nodes ...string) {
		Eventually(func(g Gomega) {
			for _, n := range nodes {
				labels := node(g, ctx, n).Labels
				g.Expect(labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, string(mode)), n)
				g.Expect(labels).NotTo(HaveKeyWithValue(gpuv1.LabelModeSwitchState, Not(Equal(string(gpuv1.ModeSwitchDone)))), n)
			}
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "%s", tl)
	}
	onMode(gpuv1.AllocationDRA, in.DRA)
	onMode(gpuv1.AllocationDevicePlugin, in.DevicePlugin...)

	// Every GPU node of the cluster switches, the other kinds' too, and
	// one whose device plugin never proves itself on the way back (the
	// kubelet-root node, with the chart's default root) holds its place
	// in the pool's budget until --driver-validation-timeout: with the
	// default budget of one node at a time it would hold the others back
	// for that long. The budget's own effect is DRASwitchSpec's.
	var budget gpuv1.DriverUpgradePolicySpec
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		budget = *cp.Spec.Driver.UpgradePolicy.DeepCopy()
		cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To(int32(0))
		cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	})
	DeferCleanup(func(ctx SpecContext) {
		setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
			cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = budget.MaxParallelUpgrades
			cp.Spec.Driver.UpgradePolicy.MaxUnavailable = budget.MaxUnavailable
		})
	})

	By("NVIDIA's GPUCluster applied: every pool in mode dra")
	tl.mark("NVIDIA's GPUCluster sample applied")
	Expect(k8s.Create(ctx, gc)).To(Succeed())
	onMode(gpuv1.AllocationDRA, in.DevicePlugin...)
	tl.mark("every watched node in mode dra")
	Eventually(func(g Gomega) {
		for _, n := range append([]string{in.DRA}, in.DevicePlugin...) {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("dra-driver"), "ready"), n)
			g.Expect(podOn(ctx, n, "device-plugin")).To(BeNil(), "never both plugins on %s", n)
			pod := podOn(ctx, n, "dra-driver")
			g.Expect(pod).NotTo(BeNil(), n)
			g.Expect(pod.Spec.Containers[0].Image).To(Equal("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0"),
				"the GPUCluster's draDriver, not the ClusterPolicy's")
		}
		got := &gpuv1alpha1.GPUCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gc), got)).To(Succeed())
		g.Expect(got.Status.State).To(Equal(gpuv1alpha1.StateNotReady), "the broken node never serves")
		ready := meta.FindStatusCondition(got.Status.Conditions, gpuv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(gpuv1alpha1.ReasonOperandNotReady))
		g.Expect(ready.Message).To(ContainSubstring(brokenNode + " (allocation mode dra, dra-driver "))
		for _, n := range append([]string{in.DRA}, in.DevicePlugin...) {
			g.Expect(ready.Message).NotTo(ContainSubstring(n+" ("), "%s serves through DRA", n)
		}
		g.Expect(got.Status.IgnoredFields).To(ConsistOf(HavePrefix("spec.dcgm: "), HavePrefix("spec.dcgmExporter: "),
			HavePrefix("spec.hostPaths: "), HavePrefix("spec.daemonsets: ")), "each refused field with why")
		GinkgoWriter.Printf("GPUCluster: %s %s: %s\n", got.Status.State, got.Status.ReadyNodes, ready.Message)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	By("the GPUCluster deleted: the pools' own modes again")
	tl.mark("GPUCluster deleted")
	Expect(k8s.Delete(ctx, gc)).To(Succeed())
	onMode(gpuv1.AllocationDevicePlugin, in.DevicePlugin...)
	tl.mark("the default pool's nodes back in mode device-plugin")
	Eventually(func(g Gomega) {
		for _, n := range in.DevicePlugin {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("device-plugin"), "ready"), n)
			g.Expect(podOn(ctx, n, "dra-driver")).To(BeNil(), n)
		}
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	labels := node(Default, ctx, in.DRA).Labels
	Expect(labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"), "the DRA pool's own mode")
	Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel("dra-driver"), "ready"))
	Expect(tl.breaches()).To(BeEmpty())
	Expect(tl.modes(in.DRA)).To(Equal([]string{"dra"}), "the DRA pool's node was never taken off its plugin")
	GinkgoWriter.Printf("GPUCluster timeline:\n%s\n", tl)
}
