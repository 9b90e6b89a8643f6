package cacheconfig

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-operator/gpu-operator/internal/render"
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
			NodeInfo:   corev1.NodeSystemInfo{BootID: "boot", KernelVersion: "6.1"},
			Images:     []corev1.ContainerImage{{Names: []string{"big/image"}, SizeBytes: 1 << 30}},
			Capacity:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "long"}, {Type: corev1.NodeMemoryPressure}},
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
	g.Expect(n.Status.Capacity).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
	g.Expect(n.Status.Conditions).To(Equal([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}))
	g.Expect(n.Spec.Unschedulable).To(BeTrue())
	g.Expect(n.Spec.PodCIDR).To(BeEmpty())
}

func TestTrimPod(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "gpu-operator", UID: "u",
			Labels: map[string]string{render.LabelState: "driver", render.LabelManagedBy: render.ManagedBy,
				"controller-revision-hash": "7d9f", "team": "gpu"},
			Annotations:   map[string]string{render.AnnotationTemplateHash: "h", "other": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			OwnerReferences: []metav1.OwnerReference{
				{Kind: "Node", Name: "gpu-1"},
				{Kind: "DaemonSet", Name: "nvidia-driver-daemonset", Controller: ptr.To(true)},
			},
		},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 4, Image: "i", ImageID: "sha",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}},
		},
	}
	out, err := TrimPod(pod)
	g.Expect(err).NotTo(HaveOccurred())
	p := out.(*corev1.Pod)
	g.Expect(p.Labels).To(Equal(map[string]string{render.LabelState: "driver", render.LabelManagedBy: render.ManagedBy}))
	g.Expect(metav1.GetControllerOf(p)).To(Equal(&pod.OwnerReferences[1]))
	g.Expect(p.OwnerReferences).To(HaveLen(1))
	g.Expect(p.Annotations).To(Equal(map[string]string{render.AnnotationTemplateHash: "h"}))
	g.Expect(p.ManagedFields).To(BeEmpty())
	g.Expect(p.Spec.NodeName).To(Equal("gpu-1"))
	g.Expect(p.Spec.Containers).To(BeEmpty())
	g.Expect(p.Status.Conditions).To(Equal([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}))
	g.Expect(p.Status.ContainerStatuses).To(Equal([]corev1.ContainerStatus{{Name: "c", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}))
}
