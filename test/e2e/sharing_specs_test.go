//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// timeSlicing is a device plugin configuration file sharing each GPU
// between replicas pods, in NVIDIA's format.
func timeSlicing(replicas string) string {
	return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " + replicas + "\n"
}

// TimeSlicingSpec gives two nodes time-slicing configurations of their
// own with NVIDIA's node label: each advertises its GPUs times the
// replicas, and GFD labels the replicas, the strategy and the -SHARED
// product; a third node stays as it was. A GPU pod on one of them holds
// its change back, and keeps running, until it goes; only the device
// plugin and GFD are replaced.
// Removing the labels brings the nodes back; the configuration goes.
func TimeSlicingSpec(ctx context.Context, four, two, untouched string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plugin-configs", Namespace: "gpu-operator"},
		Data: map[string]string{"ts-4": timeSlicing("4"), "ts-2": timeSlicing("2")}}
	if err := k8s.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs"}
	})
	pinnedGPUPods(ctx, "sharing", []string{four}, 1)
	workload := runningPods(ctx, "sharing", 1)
	exporter := operandPodOn(ctx, four, state.DCGMExporter).UID
	driverPod := operandPodOn(ctx, four, state.Driver).UID

	setNodeLabel(ctx, four, gpuv1.LabelDevicePluginConfig, "ts-4")
	setNodeLabel(ctx, two, gpuv1.LabelDevicePluginConfig, "ts-2")
	// The GPU pod holds its node's change back, and keeps running.
	Eventually(func(g Gomega) {
		g.Expect(node(g, ctx, four).Annotations).To(HaveKeyWithValue(gating.AnnotationDevicePluginConfigWaiting, ContainSubstring("1 GPU pod(s)")))
	}).WithTimeout(time.Minute).Should(Succeed())
	Expect(node(Default, ctx, four).Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	Expect(runningPods(ctx, "sharing", 1)).To(Equal(workload), "the GPU pod keeps running")
	Expect(k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "sharing"}})).To(Succeed())

	for name, want := range map[string]struct {
		gpus                        int64
		replicas, product, strategy string
	}{
		four:      {32, "4", "NVIDIA-H200-SHARED", "time-slicing"},
		two:       {16, "2", "NVIDIA-H200-SHARED", "time-slicing"},
		untouched: {8, "1", "NVIDIA-H200", "none"},
	} {
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
			g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(Equal(want.gpus))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.replicas", want.replicas))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", want.product))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.sharing-strategy", want.strategy))
		}).WithTimeout(2*time.Minute).Should(Succeed(), "node %s", name)
	}
	GinkgoWriter.Printf("time-slicing: %s\n", sharingLabels(ctx, four, two, untouched))
	Expect(operandPodOn(ctx, four, state.DCGMExporter).UID).To(Equal(exporter), "only the device plugin and GFD move")
	Expect(operandPodOn(ctx, four, state.Driver).UID).To(Equal(driverPod))

	setNodeLabel(ctx, four, gpuv1.LabelDevicePluginConfig, "")
	setNodeLabel(ctx, two, gpuv1.LabelDevicePluginConfig, "")
	Eventually(func(g Gomega) {
		for _, node := range []string{four, two} {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8), "node %s", node)
			g.Expect(n.Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.DevicePlugin.Config = nil })
	Expect(k8s.Delete(ctx, cm)).To(Succeed())
}

// sharingLabels prints what the nodes advertise and GFD's sharing labels.
func sharingLabels(ctx context.Context, nodes ...string) string {
	var out string
	for _, name := range nodes {
		n := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
		out += "\n  " + name + ": nvidia.com/gpu=" + n.Status.Allocatable.Name("nvidia.com/gpu", "").String() +
			" " + gpuv1.LabelDevicePluginConfigInUse + "=" + n.Labels[gpuv1.LabelDevicePluginConfigInUse] +
			" nvidia.com/gpu.replicas=" + n.Labels["nvidia.com/gpu.replicas"] +
			" nvidia.com/gpu.sharing-strategy=" + n.Labels["nvidia.com/gpu.sharing-strategy"] +
			" nvidia.com/gpu.product=" + n.Labels["nvidia.com/gpu.product"]
	}
	return out
}

// setNodeLabel sets, or with "" removes, a node label, as a person would.
func setNodeLabel(ctx context.Context, node, key, value string) {
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if value == "" {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
		g.Expect(k8s.Patch(ctx, n, patch)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
