package clusterpolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// adoptWorkloadPods hands the CUDA workload pods a policy being deleted
// owns to its successor, as the successor's applies hand it every object
// they render: owned by the deleted policy alone, the garbage collector
// would delete them, and every node would be proved again for nothing.
// Their metadata only is read, live: pods are not cached.
func (r *Reconciler) adoptWorkloadPods(ctx context.Context, cp, successor *gpuv1.ClusterPolicy) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.liveReader().List(ctx, list, client.InNamespace(r.Namespace),
		client.MatchingLabels{render.LabelState: string(state.CUDAWorkload), render.LabelManagedBy: render.ManagedBy}); err != nil {
		return fmt.Errorf("listing the CUDA workload pods: %w", err)
	}
	for i := range list.Items {
		pod := &list.Items[i]
		refs, owned := adopted(pod.OwnerReferences, cp, successor)
		if !owned {
			continue
		}
		patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
		pod.OwnerReferences = refs
		if err := r.Client.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("handing CUDA workload pod %s to ClusterPolicy %s: %w", pod.Name, successor.Name, err)
		}
	}
	return nil
}

// adopted returns owner references with the successor in place of cp, and
// whether cp was among them.
func adopted(refs []metav1.OwnerReference, cp, successor *gpuv1.ClusterPolicy) ([]metav1.OwnerReference, bool) {
	out := make([]metav1.OwnerReference, 0, len(refs))
	owned := false
	for _, ref := range refs {
		if ref.UID == cp.UID {
			owned = true
			continue
		}
		out = append(out, ref)
	}
	return append(out, metav1.OwnerReference{APIVersion: gpuv1.GroupVersion.String(), Kind: "ClusterPolicy", Name: successor.Name,
		UID: successor.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}), owned
}
