package maintenance

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/gpu-operator/gpu-operator/internal/gating"
)

// A kubelet's status report changes heartbeats and images, which no step
// reads: it must not wake the fleet; what a step reads must.
func TestUpgradeInputsChanged(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1", Labels: map[string]string{"a": "b"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{gating.UnhealthyTaint, {Key: "node.kubernetes.io/unreachable",
			Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Unix(100, 0)}}}},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64")},
		},
	}
	tests := map[string]struct {
		change func(n *corev1.Node)
		wakes  bool
	}{
		"heartbeat only": {change: func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(100, 0))
		}},
		"cpu allocatable":                    {change: func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("63") }},
		"a label":                            {change: func(n *corev1.Node) { n.Labels["nvidia.com/gpu-driver-upgrade-state"] = "cordon-required" }, wakes: true},
		"an annotation":                      {change: func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationCordoned: "true"} }, wakes: true},
		"cordoned":                           {change: func(n *corev1.Node) { n.Spec.Unschedulable = true }, wakes: true},
		"the repair's taint removed by hand": {change: func(n *corev1.Node) { n.Spec.Taints = nil }, wakes: true},
		"another taint's time": {change: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{gating.UnhealthyTaint, {Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute,
				TimeAdded: &metav1.Time{Time: time.Unix(200, 0)}}}
		}},
		"not ready":       {change: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, wakes: true},
		"GPUs advertised": {change: func(n *corev1.Node) { n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("0") }, wakes: true},
		"GPU capacity again": {change: func(n *corev1.Node) {
			n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		}, wakes: true},
	}
	p := upgradeInputsChanged()
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cur := base.DeepCopy()
			tt.change(cur)
			NewWithT(t).Expect(p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: cur})).To(Equal(tt.wakes))
		})
	}
}
