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
	"k8s.io/apimachinery/pkg/types"
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

// BrokenEditSpec is issue 55's sequence, as an admin makes a typo: a node
// runs time-slicing file ts-4 of ConfigMap sharing and advertises 32
// GPUs, a pod holding one of them runs there, and the file is edited to
// replicas: -4. The refusal is told on the node, which keeps ts-4; for a
// minute after, the device plugin and GFD pods on every node are the same
// pods, the node still advertises 32 GPUs, and the GPU pod still runs:
// the operands read the operator's last good copy, never the broken file.
func BrokenEditSpec(ctx context.Context, shared string, others []string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sharing", Namespace: "gpu-operator"},
		Data: map[string]string{"ts-4": timeSlicing("4")}}
	Expect(k8s.Create(ctx, cm)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "typo"}}))).
			To(Succeed())
		setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.DevicePlugin.Config = nil })
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, cm))).To(Succeed())
	})
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "sharing"}
	})
	setNodeLabel(ctx, shared, gpuv1.LabelDevicePluginConfig, "ts-4")
	gpus := func(g Gomega) int64 {
		return node(g, ctx, shared).Status.Allocatable.Name("nvidia.com/gpu", "").Value()
	}
	Eventually(func(g Gomega) {
		g.Expect(node(g, ctx, shared).Labels).To(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, "ts-4"))
		g.Expect(gpus(g)).To(BeEquivalentTo(32))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	waitAllReady(ctx, append([]string{shared}, others...))
	pinnedGPUPods(ctx, "typo", []string{shared}, 1)
	workload := runningPods(ctx, "typo", 1)
	readers := func() map[string]types.UID {
		out := map[string]types.UID{}
		for _, n := range append([]string{shared}, others...) {
			for _, s := range []state.Name{state.DevicePlugin, state.GPUFeatureDiscovery} {
				out[n+"/"+string(s)] = operandPodOn(ctx, n, s).UID
			}
		}
		return out
	}
	before := readers()

	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		cm.Data["ts-4"] = timeSlicing("-4")
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(node(g, ctx, shared).Annotations).To(HaveKeyWithValue(gating.AnnotationDevicePluginConfigRefused, ContainSubstring("-4 replicas")))
	}).WithTimeout(time.Minute).Should(Succeed())
	GinkgoWriter.Printf("refused: %s\n", node(Default, ctx, shared).Annotations[gating.AnnotationDevicePluginConfigRefused])
	Consistently(func(g Gomega) {
		g.Expect(readers()).To(Equal(before), "the device plugin and GFD pods are the ones that ran before the edit")
		g.Expect(gpus(g)).To(BeEquivalentTo(32))
		g.Expect(node(g, ctx, shared).Labels).To(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, "ts-4"))
		g.Expect(runningPods(ctx, "typo", 1)).To(Equal(workload), "the GPU pod runs on")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	Expect(node(Default, ctx, shared).Annotations).To(HaveKeyWithValue(gating.AnnotationDevicePluginConfigRefused,
		ContainSubstring("The node runs the last good copy of ts-4")))
	GinkgoWriter.Printf("a minute after the broken edit: %s\n  device plugin and GFD pods unchanged: %v\n", sharingLabels(ctx, shared), before)
}
