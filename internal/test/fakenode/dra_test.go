package fakenode

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
)

func draPlugin(ready bool, gates string, computeDomains bool) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: dradriver.GPUContainer,
		Env: []corev1.EnvVar{{Name: "FEATURE_GATES", Value: gates}}}},
		Volumes: []corev1.Volume{hostPath("registry", "/var/lib/kubelet/plugins_registry"), hostPath("plugins", "/var/lib/kubelet/plugins")}}}
	if computeDomains {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: dradriver.ComputeDomainContainer})
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func hostPath(name, at string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: at}}}
}

func summarizeSlices(n *corev1.Node, plugin *corev1.Pod) *draslices.Node {
	var kept []*draslices.Slice
	for _, rs := range DRASlices(n, plugin) {
		kept = append(kept, draslices.Keep(rs))
	}
	return draslices.Summarize(kept)
}

// The simulated node publishes what the driver would: a complete pool of
// its GPUs while the plugin runs, health taints only with the driver's
// health check gate, and nothing once the plugin stops.
func TestDRASlices(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "node-uid", Annotations: map[string]string{
		AnnotationGPUs: "4", AnnotationUnhealthyGPUs: "1"}}}

	s := summarizeSlices(n, draPlugin(true, "", true))
	g.Expect(s.Complete()).To(BeTrue())
	g.Expect(s.GPUs).To(Equal(4))
	g.Expect(s.Slices).To(Equal(2), "the GPU slice and the compute-domain slice")
	g.Expect(s.Tainted).To(BeEmpty(), "without NVMLDeviceHealthCheck the driver publishes no health")

	s = summarizeSlices(n, draPlugin(true, "MPSSupport=true,NVMLDeviceHealthCheck=true", false))
	g.Expect(s.Slices).To(Equal(1))
	g.Expect(s.Tainted).To(Equal(map[string][]string{"GPU-gpu-1-0": {"gpu.nvidia.com/xid=79"}}))

	g.Expect(DRASlices(n, draPlugin(false, "", true))).To(BeEmpty(), "a plugin not Ready publishes nothing")
	elsewhere := n.DeepCopy()
	elsewhere.Annotations[AnnotationKubeletRoot] = "/var/lib/k0s/kubelet"
	g.Expect(DRASlices(elsewhere, draPlugin(true, "", true))).To(BeEmpty(), "a plugin the kubelet cannot find publishes nothing")
	g.Expect(DRASlices(n, nil)).To(BeEmpty())
	for _, rs := range DRASlices(n, draPlugin(true, "", true)) {
		g.Expect(*rs.Spec.NodeName).To(Equal("gpu-1"))
		g.Expect(rs.OwnerReferences).To(ConsistOf(HaveField("UID", n.UID)), "the slices go with their node")
		g.Expect(rs.Name).To(Equal(DRASliceName("gpu-1", rs.Spec.Driver)))
	}
}

// A simulator's slices follow its plugins': missing ones created, changed
// ones updated on the version found, gone ones deleted, other drivers'
// left alone.
func TestSliceChanges(t *testing.T) {
	g := NewWithT(t)
	mk := func(name, driver string, devices int) *resourcev1.ResourceSlice {
		rs := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7"},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver}}
		for i := range devices {
			rs.Spec.Devices = append(rs.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("d%d", i)})
		}
		return rs
	}
	have := []*resourcev1.ResourceSlice{mk("same", draslices.GPUDriver, 2), mk("changed", draslices.GPUDriver, 2),
		mk("gone", draslices.ComputeDomainDriver, 1), mk("nic", "rdma.example.com", 1)}
	changed := mk("changed", draslices.GPUDriver, 3)
	changed.ResourceVersion = ""
	create, update, remove := SliceChanges(have, []*resourcev1.ResourceSlice{mk("same", draslices.GPUDriver, 2), changed,
		mk("new", draslices.GPUDriver, 1)})
	g.Expect(create).To(ConsistOf(HaveField("Name", "new")))
	g.Expect(update).To(ConsistOf(And(HaveField("Name", "changed"), HaveField("ResourceVersion", "7"))))
	g.Expect(remove).To(ConsistOf(HaveField("Name", "gone")))
}

// A GPU in MIG mode publishes its MIG devices, with their profile and
// parent, instead of itself, one without MIG devices nothing; and the
// plugin publishes the layout it found at its start until it restarts,
// as the driver enumerates once.
func TestDRASlicesPublishTheMIGDevicesFoundAtStart(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "node-uid", Annotations: map[string]string{
		AnnotationGPUs: "4", AnnotationUnhealthyGPUs: "1", AnnotationMIGLayout: "whole=1;emptied=1;1g.18gb=7;3g.71gb+me=2"}}}
	plugin := draPlugin(true, "NVMLDeviceHealthCheck=true", false)
	plugin.UID = "plugin-1"
	g.Expect(enumerateDRA(n, ProfileOf(n), plugin)).To(BeTrue())
	g.Expect(enumerateDRA(n, ProfileOf(n), plugin)).To(BeFalse(), "once per plugin")

	s := summarizeSlices(n, plugin)
	g.Expect(s.Complete()).To(BeTrue())
	g.Expect(s.WholeGPUs).To(Equal(1))
	g.Expect(s.MIGDevices).To(Equal(map[string]int{"1g.18gb": 7, "3g.71gb+me": 2}))
	g.Expect(s.GPUs).To(Equal(3), "the emptied GPU publishes nothing")
	g.Expect(s.Tainted).To(HaveKey("GPU-gpu-1-0"), "the unhealthy GPU is the whole one")
	for _, rs := range DRASlices(n, plugin) {
		for _, d := range rs.Spec.Devices {
			g.Expect(validation.IsDNS1123Label(d.Name)).To(BeEmpty(), "device names are DNS labels: %s", d.Name)
		}
	}

	// mig-manager repartitions while this plugin runs: it still publishes
	// what it found; its successor publishes the new layout.
	n.Annotations[AnnotationMIGLayout] = "whole=4"
	g.Expect(summarizeSlices(n, plugin).MIGDevices).To(HaveLen(2))
	next := plugin.DeepCopy()
	next.UID = "plugin-2"
	g.Expect(summarizeSlices(n, next).WholeGPUs).To(Equal(4), "before its first look is recorded, the layout now")
	g.Expect(enumerateDRA(n, ProfileOf(n), next)).To(BeTrue())
	s = summarizeSlices(n, next)
	g.Expect(s.WholeGPUs).To(Equal(4))
	g.Expect(s.MIGDevices).To(BeEmpty())
}
