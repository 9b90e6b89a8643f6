package fakenode

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
)

// configured is a ready pod of a state that reads key of ConfigMap
// "plugin-configs", mounted at /config.
func configured(s state.Name, key string) *corev1.Pod {
	spec := pluginSpec()
	spec.Containers = []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "CONFIG_FILE", Value: "/config/" + key}},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}}}}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "plugin-configs"}}}})
	return pod(s, true, spec)
}

var configs ConfigLookup = func(_, name, key string) (string, bool) {
	files := map[string]string{
		"ts-4":    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
		"mps-2":   "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
		"renamed": "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n",
		"plain":   "version: v1\nflags:\n  migStrategy: none\n",
		"broken":  "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: -4\n",
	}
	v, ok := files[key]
	return v, ok && name == "plugin-configs"
}

// A shared configuration multiplies what the plugin advertises and what
// GFD labels, as the real ones do; GFD labels from its own configuration.
func TestSharedGPUs(t *testing.T) {
	tests := map[string]struct {
		key                 string
		resource            corev1.ResourceName
		capacity, allocated int64
		product, replicas   string
		strategy            string
	}{
		"time-slicing": {key: "ts-4", resource: resourceGPU, capacity: 32, allocated: 28, product: "NVIDIA-H200-SHARED", replicas: "4", strategy: "time-slicing"},
		"mps":          {key: "mps-2", resource: resourceGPU, capacity: 16, allocated: 14, product: "NVIDIA-H200-SHARED", replicas: "2", strategy: "mps"},
		"renamed":      {key: "renamed", resource: resourceShared, capacity: 24, allocated: 21, product: "NVIDIA-H200", replicas: "3", strategy: "time-slicing"},
		"not shared":   {key: "plain", resource: resourceGPU, capacity: 8, allocated: 7, product: "NVIDIA-H200", replicas: "1", strategy: "none"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUnhealthyGPUs: "1"}}}
			Apply(n, []*corev1.Pod{configured(state.DevicePlugin, tt.key), configured(state.GPUFeatureDiscovery, tt.key), nfdWorker(),
				pod(state.MPSControlDaemon, true, corev1.PodSpec{})}, configs)
			g.Expect(n.Status.Capacity.Name(tt.resource, "").Value()).To(Equal(tt.capacity))
			g.Expect(n.Status.Allocatable.Name(tt.resource, "").Value()).To(Equal(tt.allocated))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", tt.product))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.replicas", tt.replicas))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.sharing-strategy", tt.strategy))
		})
	}
}

// Under MPS, the plugin starts only once the MPS control daemon runs, and
// GFD labels the node MPS-capable.
func TestMPSNeedsItsDaemon(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{}
	Apply(n, []*corev1.Pod{configured(state.DevicePlugin, "mps-2"), configured(state.GPUFeatureDiscovery, "mps-2"), nfdWorker()}, configs)
	g.Expect(n.Status.Allocatable.Name(resourceGPU, "").Value()).To(BeZero(), "no daemon: the plugin fails to start")
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/mps.capable", "true"))
	Apply(n, []*corev1.Pod{configured(state.DevicePlugin, "mps-2"), pod(state.MPSControlDaemon, true, corev1.PodSpec{})}, configs)
	g.Expect(n.Status.Allocatable.Name(resourceGPU, "").Value()).To(BeEquivalentTo(16))
}

// A node moving from a renamed configuration back keeps the shared
// resource at 0, as the kubelet does for a resource no plugin advertises.
func TestRenamedResourceGoesToZero(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{}
	Apply(n, []*corev1.Pod{configured(state.DevicePlugin, "renamed")}, configs)
	g.Expect(n.Status.Allocatable.Name(resourceShared, "").Value()).To(BeEquivalentTo(24))
	g.Expect(Apply(n, []*corev1.Pod{configured(state.DevicePlugin, "plain")}, configs).Status).To(BeTrue())
	g.Expect(n.Status.Allocatable.Name(resourceShared, "").Value()).To(BeZero())
	g.Expect(n.Status.Allocatable.Name(resourceGPU, "").Value()).To(BeEquivalentTo(8))
}

// A configuration file the device plugin and GFD cannot read, broken or
// not there, stops them at start: the node advertises no GPU and GFD
// labels nothing.
func TestUnreadableConfigStopsThePlugin(t *testing.T) {
	for _, key := range []string{"broken", "missing"} {
		t.Run(key, func(t *testing.T) {
			g := NewWithT(t)
			n := &corev1.Node{}
			Apply(n, []*corev1.Pod{configured(state.DevicePlugin, key), configured(state.GPUFeatureDiscovery, key), nfdWorker()}, configs)
			g.Expect(n.Status.Allocatable.Name(resourceGPU, "").Value()).To(BeZero())
			g.Expect(n.Labels).NotTo(HaveKey("nvidia.com/gpu.product"))
			Apply(n, []*corev1.Pod{configured(state.DevicePlugin, "plain"), configured(state.GPUFeatureDiscovery, "plain"), nfdWorker()}, configs)
			g.Expect(n.Status.Allocatable.Name(resourceGPU, "").Value()).To(BeEquivalentTo(8))
			g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200"))
		})
	}
}
