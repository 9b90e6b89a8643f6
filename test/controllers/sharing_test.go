package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// pluginConfigs is a ConfigMap of device plugin configurations, as users
// write them for NVIDIA's device plugin.
func (f *fixture) pluginConfigs(name string, keys ...string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{}}
	for _, k := range keys {
		cm.Data[k] = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
	}
	NewWithT(f.t).Expect(k8sClient.Create(f.ctx, cm)).To(Succeed())
	f.t.Cleanup(func() { _ = k8sClient.Delete(f.ctx, cm) })
}

// A node labelled nvidia.com/device-plugin.config runs that configuration:
// its device plugin and GFD move to the configuration's DaemonSets, which
// read it, and nothing else on the node restarts; the other node stays on
// the default. A name the ConfigMap does not hold is told, and the node
// keeps what it runs.
func TestNodeRunsItsDevicePluginConfig(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs", Default: "plain"}
	})
	f.pluginConfigs("plugin-configs", "plain", "ts-4")
	f.expectAllReady(f.nodes...)
	shared, plain := f.nodes[0], f.nodes[1]
	exporter := f.podOn(shared, "dcgm-exporter").UID
	driverPod := f.podOn(shared, "driver").UID
	g.Expect(envOf(f.podOn(shared, "device-plugin"), "CONFIG_FILE")).To(Equal("/config/plain"))

	f.setLabel(shared, gpuv1.LabelDevicePluginConfig, "ts-4")
	f.expectLabel(shared, gpuv1.LabelDevicePluginConfigInUse, "ts-4")
	g.Eventually(func() string {
		p := f.podOn(shared, "device-plugin")
		if p == nil {
			return ""
		}
		return metav1.GetControllerOf(p).Name + " " + envOf(p, "CONFIG_FILE")
	}, 2*timeout, interval).Should(Equal("nvidia-device-plugin-daemonset-ts-4 /config/ts-4"))
	g.Eventually(func() string {
		p := f.podOn(shared, "gpu-feature-discovery")
		if p == nil {
			return ""
		}
		return metav1.GetControllerOf(p).Name + " " + envOf(p, "CONFIG_FILE")
	}, 2*timeout, interval).Should(Equal("gpu-feature-discovery-ts-4 /config/ts-4"))
	f.expectAllReady(f.nodes...)
	g.Expect(f.podOn(shared, "dcgm-exporter").UID).To(Equal(exporter), "the exporter does not read the configuration")
	g.Expect(f.podOn(shared, "driver").UID).To(Equal(driverPod))
	g.Expect(f.node(plain).Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	g.Expect(metav1.GetControllerOf(f.podOn(plain, "device-plugin")).Name).To(Equal("nvidia-device-plugin-daemonset"))

	f.setLabel(shared, gpuv1.LabelDevicePluginConfig, "ts-16")
	g.Eventually(func() []string { return f.eventsOf(shared) }, timeout, interval).Should(ContainElement(And(
		ContainSubstring(`names device plugin configuration "ts-16"`), ContainSubstring("it holds: plain, ts-4"), ContainSubstring("keeps ts-4"))))
	g.Consistently(func() map[string]string { return f.node(shared).Labels }, "2s", interval).
		Should(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, "ts-4"))

	// Back to the default: the label goes, and the default's DaemonSets
	// take the node again.
	f.setLabel(shared, gpuv1.LabelDevicePluginConfig, "")
	g.Eventually(func() map[string]string { return f.node(shared).Labels }, timeout, interval).
		ShouldNot(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	g.Eventually(func() string {
		p := f.podOn(shared, "device-plugin")
		if p == nil {
			return ""
		}
		return metav1.GetControllerOf(p).Name
	}, 2*timeout, interval).Should(Equal("nvidia-device-plugin-daemonset"))
}
