package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

func allocatable(n *corev1.Node, name string, v int64) {
	n.Status.Allocatable[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.DecimalSI)
}

// GPUs the device plugin takes out of allocatable are counted, recorded
// on the node and told once; their return is told too.
func TestUnhealthyGPUsAreRecordedAndTold(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	allocatable(n, "nvidia.com/gpu", 6)
	r := decide(t, n, pods)
	g.Expect(stateOf(r, state.DevicePlugin)).To(Equal("ready"), "unhealthy GPUs do not ungate the plugin")
	g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationUnhealthyGPUs, "2"))
	g.Expect(r.Events).To(ContainElement(And(HaveField("Warning", true), HaveField("Reason", "GPUsUnhealthy"),
		HaveField("Message", ContainSubstring("nvidia.com/gpu 6 of 8")))))

	n.Annotations = r.Annotations
	again := decide(t, n, pods)
	g.Expect(again.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationUnhealthyGPUs, "2"))
	g.Expect(reasons(again)).NotTo(ContainElement("GPUsUnhealthy"), "told once")

	allocatable(n, "nvidia.com/gpu", 8)
	healed := decide(t, n, pods)
	g.Expect(healed.Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
	g.Expect(reasons(healed)).To(ContainElement("GPUsHealthy"))
}

// While the device plugin is not ready its GPUs look unhealthy (the
// kubelet marks them so when the plugin goes): the last count stands.
func TestUnhealthyGPUsNotJudgedWithoutTheDevicePlugin(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Annotations[gpuv1.AnnotationUnhealthyGPUs] = "1"
	n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))] = string(gpuv1.StatePending)
	delete(pods, state.DevicePlugin)
	allocatable(n, "nvidia.com/gpu", 0)
	r := decide(t, n, pods)
	g.Expect(stateOf(r, state.DevicePlugin)).NotTo(Equal("ready"))
	g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationUnhealthyGPUs, "1"))
	g.Expect(reasons(r)).NotTo(ContainElements("GPUsUnhealthy", "GPUsHealthy"))

	// Disabled: nothing to count, and nothing to tell.
	off := decide(t, n, pods, func(in *Input) { in.Enabled[state.DevicePlugin] = false })
	g.Expect(off.Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
	g.Expect(reasons(off)).NotTo(ContainElement("GPUsHealthy"))
}

// A device plugin that restarts leaves its state ready for the grace
// period while the kubelet shows every GPU of it unhealthy; a new plugin
// pod's word counts once it has been ready a while.
func TestDevicePluginRestartIsNoUnhealthyGPU(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	allocatable(n, "nvidia.com/gpu", 0)
	pods[state.DevicePlugin] = notReadyPod(now.Add(-5 * time.Second))
	restarting := decide(t, n, pods)
	g.Expect(stateOf(restarting, state.DevicePlugin)).To(Equal("ready"), "within its grace period")
	g.Expect(restarting.Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
	g.Expect(reasons(restarting)).NotTo(ContainElement("GPUsUnhealthy"))

	pods[state.DevicePlugin] = readyPod("p2", now.Add(-5*time.Second))
	fresh := decide(t, n, pods)
	g.Expect(fresh.Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs), "not settled yet")
	g.Expect(fresh.RequeueAfter).To(BeNumerically("<=", settle-5*time.Second))

	allocatable(n, "nvidia.com/gpu", 8)
	pods[state.DevicePlugin] = readyPod("p2", now.Add(-time.Minute))
	g.Expect(decide(t, n, pods).Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
}

func TestUnhealthyGPUsCountMIGDevices(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{}
	n.Status.Capacity = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7"), "nvidia.com/mig-3g.40gb": resource.MustParse("2"),
		"nvidia.com/hostdev": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("64")}
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("5"), "nvidia.com/mig-3g.40gb": resource.MustParse("2"),
		"nvidia.com/hostdev": resource.MustParse("0"), corev1.ResourceCPU: resource.MustParse("60")}
	count, short := UnhealthyGPUs(n)
	g.Expect(count).To(BeEquivalentTo(2))
	g.Expect(short).To(Equal([]string{"nvidia.com/mig-1g.10gb 5 of 7"}))
}
