package fakenode

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
)

func draPlugin(ready bool, gates string, computeDomains bool) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: dradriver.GPUContainer,
		Env: []corev1.EnvVar{{Name: "FEATURE_GATES", Value: gates}}}}}}
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
