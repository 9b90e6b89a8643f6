package node

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// readinessTaint is the taint spec.operator.readinessTaint keeps on a GPU
// node that is not ready.
var readinessTaint = corev1.Taint{Key: gpuv1.TaintGPUNotReady, Effect: corev1.TaintEffectNoSchedule}

// isReadinessTaint matches the operator's taint: its key and effect.
func isReadinessTaint(t corev1.Taint) bool {
	return t.Key == readinessTaint.Key && t.Effect == readinessTaint.Effect
}

// syncReadinessTaint adds the readiness taint where the decision wants it,
// or removes it where the operator set it (its annotation says so) and the
// decision no longer wants it. The taint is written before the labels and
// annotations: the annotation that marks it the operator's is removed only
// once the taint is gone, so a restart in between never leaves a taint no
// one removes. Node taints are an atomic list, which server-side apply
// would own whole; a merge patch with the node's resourceVersion as a
// precondition changes only this one and loses no one else's. It reports
// whether the node is as wanted; node then holds the patched node, whose
// resourceVersion the label write goes on from.
func (r *Reconciler) syncReadinessTaint(ctx context.Context, node *corev1.Node, want bool) (bool, error) {
	has := slices.ContainsFunc(node.Spec.Taints, isReadinessTaint)
	owned := node.Annotations[gpuv1.AnnotationReadinessTaint] == gpuv1.LabelTrue
	var taints []corev1.Taint
	switch {
	case want && !has:
		taints = append(slices.Clone(node.Spec.Taints), readinessTaint)
	case !want && has && owned:
		taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), isReadinessTaint)
	default:
		return true, nil
	}
	patched := node.DeepCopy()
	patched.Spec.Taints = taints
	err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(r.FieldOwner))
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("writing the readiness taint of node %s: %w", node.Name, err)
	}
	*node = *patched
	return true, nil
}

// ownsReadinessTaint reports whether the node carries the readiness taint
// the operator set.
func ownsReadinessTaint(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, isReadinessTaint) &&
		node.Annotations[gpuv1.AnnotationReadinessTaint] == gpuv1.LabelTrue
}
