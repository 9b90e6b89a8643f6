package clusterpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=pods,verbs=patch

// podMetadataBatch bounds the running pods given new metadata in one
// reconcile: the first reconcile of an operator that brings new labels
// finds every driver pod behind, and a thousand patches in one pass would
// hold the client's rate limit, which every controller shares, for a
// minute.
const podMetadataBatch = 100

// podMetadataRequeue is how soon a reconcile that left pods behind comes
// back for them.
const podMetadataRequeue = time.Second

// podMetadataPatched remembers the pods patched, and to which hash, until
// the pod index shows the patch: a reconcile before that would patch them
// again.
type podMetadataPatched struct {
	mu  sync.Mutex
	set map[types.UID]string
}

// updateRunningPodMetadata puts the labels and annotations of each applied
// OnDelete DaemonSet's template on its running pods whose metadata hash
// differs: the driver's pods are replaced only by an upgrade, and without
// this a label of daemonsets.labels, NVIDIA's app label or a
// podAnnotation would reach them at the next driver change, maybe months
// later. NVIDIA's operator gets there by replacing every driver, its
// upgrade judging pods by the template's revision; ours never replaces a
// driver for its metadata (render.specHash). One patch per pod and
// change, at most podMetadataBatch a reconcile; more reports that pods
// are left for the next. A pod made from the template already carries its
// hash: a rollout patches none.
func (r *Reconciler) updateRunningPodMetadata(ctx context.Context, applied []client.Object) (more bool, err error) {
	if r.Pods == nil {
		return false, nil
	}
	r.podMetadata.mu.Lock()
	defer r.podMetadata.mu.Unlock()
	patched := map[types.UID]string{}
	var errs []error
	budget := podMetadataBatch
	for _, o := range applied {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok || ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			continue
		}
		want := ds.Spec.Template.Annotations[render.AnnotationMetadataHash]
		pods, err := r.Pods.OfState(state.Name(ds.Spec.Template.Labels[render.LabelState]))
		if err != nil {
			return false, errors.Join(append(errs, err)...)
		}
		var patch []byte
		for _, p := range pods {
			if p.DaemonSet != ds.Name || p.DeletionTimestamp != nil || p.Annotation(render.AnnotationMetadataHash) == want {
				continue
			}
			if r.podMetadata.set[p.UID] == want {
				patched[p.UID] = want // written; the index is behind
				continue
			}
			if budget == 0 {
				more = true
				continue
			}
			if patch == nil {
				if patch, err = metadataPatch(&ds.Spec.Template); err != nil {
					return false, errors.Join(append(errs, err)...)
				}
			}
			budget--
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if err := r.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("putting DaemonSet %s's labels on its running pod %s: %w", ds.Name, p.Name, err))
				continue
			}
			patched[p.UID] = want
		}
	}
	r.podMetadata.set = patched
	return more, errors.Join(errs...)
}

// metadataPatch is the merge patch of the template's running pod metadata:
// it adds and changes, and removes nothing.
func metadataPatch(tpl *corev1.PodTemplateSpec) ([]byte, error) {
	labels, annotations := render.RunningPodMetadata(tpl)
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
}
