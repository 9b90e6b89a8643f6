package node

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/gating"
)

// syncReadinessTaint adds the readiness taint where the decision wants it
// and the node has no taint of its key, or removes the operator's where
// the decision no longer wants it. The taint's value says it is the
// operator's, so a restart at any point leaves no taint nobody removes.
// Node taints are an atomic list, which server-side apply would own whole;
// a merge patch with the node's resourceVersion as a precondition changes
// only this one and loses no one else's. It reports whether the node is as
// wanted; node then holds the patched node, whose resourceVersion the label
// write goes on from.
func (r *Reconciler) syncReadinessTaint(ctx context.Context, node *corev1.Node, want bool) (bool, error) {
	var taints []corev1.Taint
	switch {
	case want && !slices.ContainsFunc(node.Spec.Taints, gating.HasReadinessTaintKey):
		taints = append(slices.Clone(node.Spec.Taints), gating.ReadinessTaint)
	case !want && slices.ContainsFunc(node.Spec.Taints, gating.IsOwnReadinessTaint):
		taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), gating.IsOwnReadinessTaint)
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
	if patched.ResourceVersion != node.ResourceVersion {
		r.written.wrote(node.Name, node.ResourceVersion)
	}
	*node = *patched
	return true, nil
}
