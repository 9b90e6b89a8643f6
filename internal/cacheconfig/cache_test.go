package cacheconfig

import (
	"strings"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimNode(t *testing.T) {
	g := NewWithT(t)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "gpu-1", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{"a": "b"},
			Annotations:   map[string]string{"nvidia.com/gpu-operator.boot-id": "x", "other.io/big": "blob"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{BootID: "boot", KernelVersion: "6.1"},
			Images:   []corev1.ContainerImage{{Names: []string{"big/image"}, SizeBytes: 1 << 30}},
			Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("96"),
				"nvidia.com/hostdev": resource.MustParse("4")},
			Allocatable: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "long"}, {Type: corev1.NodeMemoryPressure}},
		},
	}
	out, err := TrimNode(node)
	g.Expect(err).NotTo(HaveOccurred())
	n := out.(*corev1.Node)
	g.Expect(n.Name).To(Equal("gpu-1"))
	g.Expect(n.ResourceVersion).To(Equal("7"))
	g.Expect(n.Labels).To(Equal(node.Labels))
	g.Expect(n.Annotations).To(Equal(map[string]string{"nvidia.com/gpu-operator.boot-id": "x"}))
	g.Expect(n.ManagedFields).To(BeEmpty())
	g.Expect(n.Status.Images).To(BeEmpty())
	g.Expect(n.Status.NodeInfo).To(Equal(corev1.NodeSystemInfo{BootID: "boot"}))
	g.Expect(n.Status.Capacity).To(Equal(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}))
	g.Expect(n.Status.Allocatable).To(Equal(corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7")}))
	g.Expect(n.Status.Conditions).To(Equal([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}))
	g.Expect(n.Spec.Unschedulable).To(BeTrue())
	g.Expect(n.Spec.PodCIDR).To(BeEmpty())
}

func TestTrimNodeSharesLabelStringsAcrossNodes(t *testing.T) {
	g := NewWithT(t)
	decoded := func() *corev1.Node {
		// Strings built at run time, as a decoder builds them: two nodes
		// never share their bytes.
		key, value := strings.Repeat("feature.node.kubernetes.io/pci-10de.", 1)+"present", strings.Clone("true")
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{key: value}}}
	}
	a, b := decoded(), decoded()
	g.Expect(dataOfOnlyKey(a.Labels)).NotTo(BeIdenticalTo(dataOfOnlyKey(b.Labels)))
	ta, _ := TrimNode(a)
	tb, _ := TrimNode(b)
	la, lb := ta.(*corev1.Node).Labels, tb.(*corev1.Node).Labels
	g.Expect(la).To(Equal(a.Labels))
	g.Expect(dataOfOnlyKey(la)).To(BeIdenticalTo(dataOfOnlyKey(lb)))
	g.Expect(unsafe.StringData(la["feature.node.kubernetes.io/pci-10de.present"])).
		To(BeIdenticalTo(unsafe.StringData(lb["feature.node.kubernetes.io/pci-10de.present"])))
}

func dataOfOnlyKey(m map[string]string) *byte {
	for k := range m {
		return unsafe.StringData(k)
	}
	return nil
}
