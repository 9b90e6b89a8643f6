package clusterpolicy

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
)

// The policy's finalizer waits for every mark the operator sets on a node
// and nobody else does: its annotations (the node controller's, the
// upgrade's, the repair's) and its taints. A person's approval, a state
// label and a taint of the same key with another value are not its own,
// and waiting for them would keep the policy for ever.
func TestNotCleanedUp(t *testing.T) {
	node := func(annotations map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	tests := map[string]struct {
		node *corev1.Node
		want bool
	}{
		"clean":                       {node: node(nil), want: false},
		"the node controller's":       {node: node(map[string]string{gpuv1.OperatorAnnotationPrefix + "boot-id": "b"}), want: true},
		"the upgrade's":               {node: node(map[string]string{gpuv1.UpgradeAnnotationPrefix + "since": "t"}), want: true},
		"the repair's":                {node: node(map[string]string{gpuv1.RemediationAnnotationPrefix + "since": "t"}), want: true},
		"a person's approval":         {node: node(map[string]string{gpuv1.AnnotationRemediationApproved: "true"}), want: false},
		"the readiness taint":         {node: node(nil, gating.ReadinessTaint), want: true},
		"the unhealthy taint":         {node: node(nil, gating.UnhealthyTaint), want: true},
		"the MIG reconfiguration's":   {node: node(map[string]string{gpuv1.AnnotationMIGApplied: "all-disabled"}), want: true},
		"the reconfiguring taint":     {node: node(nil, gating.MIGTaint), want: true},
		"someone's taint of that key": {node: node(nil, corev1.Taint{Key: gpuv1.TaintGPUUnhealthy, Value: "ops", Effect: corev1.TaintEffectNoSchedule}), want: false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(notCleanedUp(tt.node)).To(Equal(tt.want))
		})
	}
}
