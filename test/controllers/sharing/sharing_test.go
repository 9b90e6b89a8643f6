package sharing

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// pluginConfigs is a ConfigMap of device plugin configurations, as users
// write them for NVIDIA's device plugin: files by name.
func pluginConfigs(f *controllertest.Fixture, name string, files map[string]string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: controllertest.Namespace}, Data: files}
	NewWithT(f.T).Expect(suite.Client.Create(f.Ctx, cm)).To(Succeed())
	f.T.Cleanup(func() { _ = suite.Client.Delete(f.Ctx, cm) })
}

// A node labelled nvidia.com/device-plugin.config runs that configuration:
// its device plugin and GFD move to the configuration's DaemonSets, which
// read it, and nothing else on the node restarts; the other node stays on
// the default. A new content of the file restarts the pods that read it; a
// change waits for the node's GPU pods; a name the ConfigMap does not hold
// is told, and the node keeps what it runs.
func TestNodeRunsItsDevicePluginConfig(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs", Default: "plain"}
	})
	pluginConfigs(f, "plugin-configs", map[string]string{
		"plain": "version: v1\nflags:\n  migStrategy: single\n",
		"ts-4":  "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
	})
	f.ExpectAllReady(f.Nodes...)
	shared, plain := f.Nodes[0], f.Nodes[1]
	exporter := f.PodOn(shared, "dcgm-exporter").UID
	driverPod := f.PodOn(shared, "driver").UID
	g.Expect(controllertest.EnvOf(f.PodOn(shared, "device-plugin"), "CONFIG_FILE")).To(Equal("/config/plain"))

	f.SetLabel(shared, gpuv1.LabelDevicePluginConfig, "ts-4")
	f.ExpectLabel(shared, gpuv1.LabelDevicePluginConfigInUse, "ts-4")
	g.Eventually(func() string {
		p := f.PodOn(shared, "device-plugin")
		if p == nil {
			return ""
		}
		return metav1.GetControllerOf(p).Name + " " + controllertest.EnvOf(p, "CONFIG_FILE")
	}, 2*controllertest.Timeout, controllertest.Interval).Should(Equal("nvidia-device-plugin-daemonset-c-ts-4 /config/ts-4"))
	g.Eventually(func() string {
		p := f.PodOn(shared, "gpu-feature-discovery")
		if p == nil {
			return ""
		}
		return metav1.GetControllerOf(p).Name + " " + controllertest.EnvOf(p, "CONFIG_FILE")
	}, 2*controllertest.Timeout, controllertest.Interval).Should(Equal("gpu-feature-discovery-c-ts-4 /config/ts-4"))
	f.ExpectAllReady(f.Nodes...)
	// What the simulated plugin and GFD make of time-slicing with 4
	// replicas (internal/test/fakenode).
	g.Eventually(func() int64 {
		return f.Node(shared).Status.Allocatable.Name("nvidia.com/gpu", "").Value()
	}, controllertest.Timeout, controllertest.Interval).Should(BeEquivalentTo(32))
	g.Eventually(func() map[string]string { return f.Node(shared).Labels }, controllertest.Timeout, controllertest.Interval).Should(And(
		HaveKeyWithValue("nvidia.com/gpu.replicas", "4"), HaveKeyWithValue("nvidia.com/gpu.sharing-strategy", "time-slicing"),
		HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-SHARED")))
	g.Expect(f.Node(plain).Labels).To(HaveKeyWithValue("nvidia.com/gpu.replicas", "1"))
	g.Expect(f.PodOn(shared, "dcgm-exporter").UID).To(Equal(exporter), "the exporter does not read the configuration")
	g.Expect(f.PodOn(shared, "driver").UID).To(Equal(driverPod))
	g.Expect(f.Node(plain).Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	g.Expect(metav1.GetControllerOf(f.PodOn(plain, "device-plugin")).Name).To(Equal("nvidia-device-plugin-daemonset"))

	// A new content of the file rolls the pods that read it.
	plugin := f.PodOn(shared, "device-plugin").UID
	g.Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: controllertest.Namespace, Name: "plugin-configs"}, cm); err != nil {
			return err
		}
		cm.Data["ts-4"] = strings.Replace(cm.Data["ts-4"], "replicas: 4", "replicas: 4\n    # tuned", 1)
		return suite.Client.Update(f.Ctx, cm)
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	g.Eventually(func() types.UID {
		if p := f.PodOn(shared, "device-plugin"); p != nil {
			return p.UID
		}
		return plugin
	}, 2*controllertest.Timeout, controllertest.Interval).ShouldNot(Equal(plugin), "the plugin reads its file at start only")
	f.ExpectAllReady(f.Nodes...)

	// A change waits while GPU pods run: shared GPUs' device IDs differ
	// from whole ones', and the kubelet would hand out a GPU a running pod
	// holds.
	f.EnsureNamespace("workloads")
	gpuPod := f.GPUPod("trainer", plain, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": controllertest.ResourceOne}
	})
	f.SetLabel(plain, gpuv1.LabelDevicePluginConfig, "ts-4")
	g.Eventually(func() map[string]string { return f.Node(plain).Annotations }, controllertest.Timeout, controllertest.Interval).
		Should(HaveKeyWithValue(gating.AnnotationDevicePluginConfigWaiting, ContainSubstring("1 GPU pod(s)")))
	g.Expect(f.Node(plain).Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	g.Expect(suite.Client.Delete(f.Ctx, gpuPod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() map[string]string { return f.Node(plain).Labels }, time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, "ts-4"), "once the GPU pod is gone")
	g.Expect(f.Node(plain).Annotations).NotTo(HaveKey(gating.AnnotationDevicePluginConfigWaiting))
	f.SetLabel(plain, gpuv1.LabelDevicePluginConfig, "")

	f.SetLabel(shared, gpuv1.LabelDevicePluginConfig, "ts-16")
	g.Eventually(func() []string { return f.EventsOf(shared) }, controllertest.Timeout, controllertest.Interval).Should(ContainElement(And(
		ContainSubstring(`names device plugin configuration "ts-16"`), ContainSubstring("it holds: plain, ts-4"), ContainSubstring("The node runs ts-4"))))
	g.Consistently(func() map[string]string { return f.Node(shared).Labels }, "2s", controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, "ts-4"))

	// Back to the default: the label goes, and the default's DaemonSets
	// take the node again.
	f.SetLabel(shared, gpuv1.LabelDevicePluginConfig, "")
	g.Eventually(func() map[string]string { return f.Node(shared).Labels }, controllertest.Timeout, controllertest.Interval).
		ShouldNot(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	g.Eventually(func() string {
		p := f.PodOn(shared, "device-plugin")
		if p == nil {
			return ""
		}
		return metav1.GetControllerOf(p).Name
	}, 2*controllertest.Timeout, controllertest.Interval).Should(Equal("nvidia-device-plugin-daemonset"))
	g.Eventually(func() int64 {
		return f.Node(shared).Status.Allocatable.Name("nvidia.com/gpu", "").Value()
	}, controllertest.Timeout, controllertest.Interval).Should(BeEquivalentTo(8))
	g.Eventually(func() map[string]string { return f.Node(shared).Labels }, controllertest.Timeout, controllertest.Interval).
		Should(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200"))
}

// A driver pool's devicePluginConfig is its nodes' configuration, and a
// node's own label wins over it.
func TestPoolRunsItsDevicePluginConfig(t *testing.T) {
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs"}
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{{Name: "h200", DevicePluginConfig: "ts-4",
			NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h200"}}}
	})
	pluginConfigs(f, "plugin-configs", map[string]string{
		"ts-2": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
		"ts-4": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
	})
	pooled, own := f.Nodes[0], f.Nodes[1]
	f.SetLabel(pooled, "gpu", "h200")
	f.SetLabel(own, "gpu", "h200")
	f.SetLabel(own, gpuv1.LabelDevicePluginConfig, "ts-2")
	f.ExpectLabel(pooled, gpuv1.LabelDevicePluginConfigInUse, "ts-4")
	f.ExpectLabel(own, gpuv1.LabelDevicePluginConfigInUse, "ts-2")
	f.ExpectAllReady(f.Nodes...)
	g := NewWithT(t)
	for node, want := range map[string]int64{pooled: 32, own: 16} {
		g.Eventually(func() int64 {
			return f.Node(node).Status.Allocatable.Name("nvidia.com/gpu", "").Value()
		}, 2*controllertest.Timeout, controllertest.Interval).Should(Equal(want), "node %s", node)
	}
}

// A node labelled with an MPS configuration runs the MPS control daemon,
// and its device plugin starts only once the daemon is ready there, with
// MPS's root; the other node runs neither. Back to the default, the
// daemon leaves the node.
func TestNodeRunsMPS(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs", Default: "plain"}
	})
	pluginConfigs(f, "plugin-configs", map[string]string{
		"plain": "version: v1\n",
		"mps-2": "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
	})
	f.ExpectAllReady(f.Nodes...)
	shared, plain := f.Nodes[0], f.Nodes[1]
	f.ExpectState("disabled", "mps-control-daemon", f.Nodes...)

	// The daemon not ready yet: the plugin of the MPS configuration waits.
	suite.Sim.Set(shared, "mps-control-daemon", controllertest.StaysNotReady)
	t.Cleanup(func() { suite.Sim.Set(shared, "mps-control-daemon", controllertest.BecomesReady) })
	f.SetLabel(shared, gpuv1.LabelDevicePluginConfig, "mps-2")
	f.ExpectState("pending", "mps-control-daemon", shared)
	f.ExpectState("pending", "device-plugin", shared)
	g.Consistently(func() string {
		if p := f.PodOn(shared, "device-plugin"); p != nil {
			return metav1.GetControllerOf(p).Name
		}
		return ""
	}, "3s", controllertest.Interval).ShouldNot(Equal("nvidia-device-plugin-daemonset-c-mps-2"),
		"the plugin checks the daemon is up when it starts: it waits for it")
	suite.Sim.Set(shared, "mps-control-daemon", controllertest.BecomesReady)
	f.ExpectState("ready", "mps-control-daemon", shared)
	f.ExpectAllReady(shared)
	g.Eventually(func() int64 {
		return f.Node(shared).Status.Allocatable.Name("nvidia.com/gpu", "").Value()
	}, controllertest.Timeout, controllertest.Interval).Should(BeEquivalentTo(16))
	g.Eventually(func() map[string]string { return f.Node(shared).Labels }, controllertest.Timeout, controllertest.Interval).Should(And(
		HaveKeyWithValue("nvidia.com/gpu.sharing-strategy", "mps"), HaveKeyWithValue("nvidia.com/mps.capable", "true"),
		HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-SHARED")))
	daemon, plugin := f.PodOn(shared, "mps-control-daemon"), f.PodOn(shared, "device-plugin")
	g.Expect(metav1.GetControllerOf(daemon).Name).To(Equal("nvidia-device-plugin-mps-control-daemon-c-mps-2"))
	g.Expect(controllertest.EnvOf(daemon, "CONFIG_FILE")).To(Equal("/config/mps-2"))
	g.Expect(controllertest.EnvOf(plugin, "MPS_ROOT")).To(Equal("/run/nvidia/mps"))
	g.Expect(f.PodOn(plain, "mps-control-daemon")).To(BeNil())
	f.ExpectState("disabled", "mps-control-daemon", plain)

	f.SetLabel(shared, gpuv1.LabelDevicePluginConfig, "")
	f.ExpectState("disabled", "mps-control-daemon", shared)
	g.Eventually(func() *corev1.Pod { return f.PodOn(shared, "mps-control-daemon") }, controllertest.Timeout, controllertest.Interval).Should(BeNil())
	g.Eventually(func() int64 {
		return f.Node(shared).Status.Allocatable.Name("nvidia.com/gpu", "").Value()
	}, controllertest.Timeout, controllertest.Interval).Should(BeEquivalentTo(8))
}
