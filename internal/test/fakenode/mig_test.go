package fakenode

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
)

// migManagerPod is a running mig-manager pod mounting the default file.
func migManagerPod(uid string) *corev1.Pod {
	p := pod(state.MIGManager, true, corev1.PodSpec{
		Containers: []corev1.Container{{Name: "m", VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: migConfigDir}}}},
		Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: gpuv1.DefaultMIGConfigMap}}}}},
	})
	p.UID = types.UID(uid)
	return p
}

func pluginPod(strategy string) *corev1.Pod {
	spec := pluginSpec()
	spec.Containers = []corev1.Container{{Name: "p", Env: []corev1.EnvVar{{Name: "MIG_STRATEGY", Value: strategy}}}}
	return pod(state.DevicePlugin, true, spec)
}

func defaultFile(_, name, key string) (string, bool) {
	if name != gpuv1.DefaultMIGConfigMap || key != migconfig.FileKey {
		return "", false
	}
	return migmanager.DefaultConfig, true
}

func migNode(config string, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{gpuv1.LabelMIGConfig: config}, Annotations: annotations}}
}

// The simulated mig-manager goes pending, then partitions the GPUs and
// reports success; the device plugin then advertises the MIG devices as
// its strategy names them, and GFD labels them.
func TestMIGManagerPartitionsTheGPUs(t *testing.T) {
	g := NewWithT(t)
	n := migNode("all-1g.18gb", nil)
	m := migManagerPod("m1")
	g.Expect(Apply(n, []*corev1.Pod{m}, defaultFile).Labels).To(BeTrue())
	g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, gpuv1.MIGConfigPending))
	g.Expect(Apply(n, []*corev1.Pod{m}, defaultFile).Labels).To(BeTrue())
	g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, gpuv1.MIGConfigSuccess))
	g.Expect(n.Annotations).To(HaveKeyWithValue(AnnotationMIGLayout, "whole=0;1g.18gb=56"))
	g.Expect(Apply(n, []*corev1.Pod{m}, defaultFile).Labels).To(BeFalse(), "done: it waits for a change of the label")

	Apply(n, []*corev1.Pod{pluginPod("single"), pod(state.GPUFeatureDiscovery, true, corev1.PodSpec{}), nfdWorker()}, nil)
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(56))
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-MIG-1g.18gb"))
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.count", "56"))

	Apply(n, []*corev1.Pod{pluginPod("mixed")}, nil)
	g.Expect(n.Status.Allocatable.Name("nvidia.com/mig-1g.18gb", "").Value()).To(BeEquivalentTo(56))
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeZero(), "kept at 0 by the kubelet")

	// Back to whole GPUs, through a new pod: it asserts nothing is left
	// to do only when so.
	n.Labels[gpuv1.LabelMIGConfig] = "all-disabled"
	m2 := migManagerPod("m2")
	Apply(n, []*corev1.Pod{m2}, defaultFile)
	Apply(n, []*corev1.Pod{m2}, defaultFile)
	g.Expect(n.Annotations).To(HaveKeyWithValue(AnnotationMIGLayout, "whole=8"))
	Apply(n, []*corev1.Pod{pluginPod("mixed")}, nil)
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
	g.Expect(n.Status.Allocatable.Name("nvidia.com/mig-1g.18gb", "").Value()).To(BeZero())
}

// MIG enabled without devices: nothing to advertise, and GFD calls the
// product INVALID under the single strategy.
func TestMIGEnabledWithoutDevices(t *testing.T) {
	g := NewWithT(t)
	n := migNode("all-enabled", nil)
	m := migManagerPod("m1")
	Apply(n, []*corev1.Pod{m}, defaultFile)
	Apply(n, []*corev1.Pod{m}, defaultFile)
	g.Expect(n.Annotations).To(HaveKeyWithValue(AnnotationMIGLayout, "whole=0"))
	Apply(n, []*corev1.Pod{pluginPod("single"), pod(state.GPUFeatureDiscovery, true, corev1.PodSpec{}), nfdWorker()}, nil)
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeZero())
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-MIG-INVALID"))
}

// An unknown name fails, as mig-parted's assert does; a layout already in
// place succeeds at once.
func TestMIGManagerAssertsFirst(t *testing.T) {
	g := NewWithT(t)
	n := migNode("all-9g", nil)
	Apply(n, []*corev1.Pod{migManagerPod("m1")}, defaultFile)
	g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, gpuv1.MIGConfigFailed))

	n = migNode("all-disabled", nil)
	Apply(n, []*corev1.Pod{migManagerPod("m1")}, defaultFile)
	g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, gpuv1.MIGConfigSuccess))
}

// Faults: for good, or under the first pod alone, which the next pod (the
// operator's retry) gets past.
func TestMIGManagerFaults(t *testing.T) {
	for fault, first := range map[string]string{MIGFail: gpuv1.MIGConfigFailed, MIGHang: gpuv1.MIGConfigPending,
		MIGFailOnce: gpuv1.MIGConfigFailed, MIGHangOnce: gpuv1.MIGConfigPending} {
		t.Run(fault, func(t *testing.T) {
			g := NewWithT(t)
			n := migNode("all-1g.18gb", map[string]string{AnnotationMIGApply: fault})
			for range 3 {
				Apply(n, []*corev1.Pod{migManagerPod("m1")}, defaultFile)
			}
			g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, first))
			g.Expect(n.Annotations).NotTo(HaveKey(AnnotationMIGLayout))
			for range 3 {
				Apply(n, []*corev1.Pod{migManagerPod("m2")}, defaultFile)
			}
			if fault == MIGFailOnce || fault == MIGHangOnce {
				g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, gpuv1.MIGConfigSuccess))
			} else {
				g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, first))
			}
		})
	}
}

func driverPod(uid string) *corev1.Pod {
	p := pod(state.Driver, true, corev1.PodSpec{})
	p.UID = types.UID(uid)
	return p
}

// MIG devices last as long as the boot and the driver they were created
// under; MIG mode outlives both. With devices gone, the device plugin does
// not start under the single strategy, and GFD says INVALID, until
// mig-manager creates them again.
func TestMIGDevicesDoNotSurviveADriverReload(t *testing.T) {
	for name, reload := range map[string]func(n *corev1.Node) *corev1.Pod{
		"new driver pod": func(*corev1.Node) *corev1.Pod { return driverPod("d2") },
		"reboot": func(n *corev1.Node) *corev1.Pod {
			n.Status.NodeInfo.BootID = "boot-2"
			return driverPod("d1") // its containers restart in the same pod
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := migNode("all-1g.18gb", nil)
			n.Status.NodeInfo.BootID = "boot-1"
			pods := []*corev1.Pod{driverPod("d1"), migManagerPod("m1")}
			Apply(n, pods, defaultFile)
			Apply(n, pods, defaultFile)
			g.Expect(n.Annotations).To(HaveKeyWithValue(AnnotationMIGLayout, "whole=0;1g.18gb=56"))
			g.Expect(Apply(n, []*corev1.Pod{driverPod("d1")}, defaultFile).Labels).To(BeFalse(), "the same driver keeps them")

			driver := reload(n)
			g.Expect(Apply(n, []*corev1.Pod{driver}, defaultFile).Labels).To(BeTrue())
			g.Expect(n.Annotations).To(HaveKeyWithValue(AnnotationMIGLayout, "whole=0;emptied=8"))
			Apply(n, []*corev1.Pod{driver, pluginPod("single"), pod(state.GPUFeatureDiscovery, true, corev1.PodSpec{}), nfdWorker()}, nil)
			g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeZero(), "the plugin fails to start")
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-MIG-INVALID"))

			m2 := migManagerPod("m2")
			Apply(n, []*corev1.Pod{driver, m2}, defaultFile)
			Apply(n, []*corev1.Pod{driver, m2}, defaultFile)
			g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfigState, gpuv1.MIGConfigSuccess))
			Apply(n, []*corev1.Pod{driver, pluginPod("single")}, nil)
			g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(56))
		})
	}
}
