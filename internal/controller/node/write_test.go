package node

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/gating"
)

func TestNeedsWrite(t *testing.T) {
	node := func(labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
	}
	want := gating.Result{
		Labels:      map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.state.driver": "ready"},
		Annotations: map[string]string{"nvidia.com/gpu-operator.boot-id": "b"},
	}
	tests := map[string]struct {
		node *corev1.Node
		want gating.Result
		exp  bool
	}{
		"already as wanted, with a user's labels": {
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.state.driver": "ready", "user": "x"},
				map[string]string{"nvidia.com/gpu-operator.boot-id": "b"}),
			want: want,
		},
		"a label value differs": {
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.state.driver": "pending"},
				map[string]string{"nvidia.com/gpu-operator.boot-id": "b"}),
			want: want, exp: true,
		},
		"a state label is no longer wanted": {
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.state.driver": "ready", "nvidia.com/gpu.state.old": "ready"},
				map[string]string{"nvidia.com/gpu-operator.boot-id": "b"}),
			want: want, exp: true,
		},
		"an operator annotation is no longer wanted": {
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.state.driver": "ready"},
				map[string]string{"nvidia.com/gpu-operator.boot-id": "b", "nvidia.com/gpu-operator.not-before": "x"}),
			want: want, exp: true,
		},
		"back on the default device plugin configuration": {
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.state.driver": "ready",
				"nvidia.com/gpu.device-plugin-config": "ts-4"}, map[string]string{"nvidia.com/gpu-operator.boot-id": "b"}),
			want: want, exp: true,
		},
		"cleanup of a node with state labels": {
			node: node(map[string]string{"nvidia.com/gpu.state.driver": "ready"}, nil), exp: true,
		},
		"nothing to clean: a user's deploy label stays without writes": {
			node: node(map[string]string{"nvidia.com/gpu.deploy.driver": "false", "nvidia.com/gpu.present": "true"}, nil),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(needsWrite(tt.node, tt.want)).To(Equal(tt.exp))
		})
	}
}
