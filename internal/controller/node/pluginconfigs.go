package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// gpuPodsOn counts the pods on a node that hold GPUs the device plugin
// allocated (an nvidia.com/ resource), listed live: only a node whose
// configuration is to change asks.
func (r *Reconciler) gpuPodsOn(ctx context.Context, node string) (int, error) {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		// The CUDA workload proof ends within seconds, and is made again
		// for the new plugin pod: not a GPU pod to wait for.
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && gating.RequestsNVIDIAResource(p) &&
			p.Labels[render.LabelState] != string(state.CUDAWorkload) {
			n++
		}
	}
	return n, nil
}
