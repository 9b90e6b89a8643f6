package clusterpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=pods,verbs=patch

// updateRunningPodMetadata puts the labels and annotations of each applied
// OnDelete DaemonSet's template on its running pods whose metadata hash
// differs: the driver's pods are replaced only by an upgrade, and without
// this a label of daemonsets.labels, NVIDIA's app label or a
// podAnnotation would reach them at the next driver change, maybe months
// later. NVIDIA's operator gets there by replacing every driver, its
// upgrade judging pods by the template's revision; ours never replaces a
// driver for its metadata (render.specHash). One patch per pod and
// change; a pod made from the template already carries its hash.
func (r *Reconciler) updateRunningPodMetadata(ctx context.Context, applied []client.Object) error {
	if r.Pods == nil {
		return nil
	}
	var errs []error
	for _, o := range applied {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok || ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			continue
		}
		want := ds.Spec.Template.Annotations[render.AnnotationMetadataHash]
		pods, err := r.Pods.OfState(state.Name(ds.Spec.Template.Labels[render.LabelState]))
		if err != nil {
			return err
		}
		var patch []byte
		for _, p := range pods {
			if p.DaemonSet != ds.Name || p.DeletionTimestamp != nil || p.Annotation(render.AnnotationMetadataHash) == want {
				continue
			}
			if patch == nil {
				if patch, err = metadataPatch(&ds.Spec.Template); err != nil {
					return err
				}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if err := r.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("putting DaemonSet %s's labels on its running pod %s: %w", ds.Name, p.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// metadataPatch is the merge patch of the template's running pod metadata:
// it adds and changes, and removes nothing.
func metadataPatch(tpl *corev1.PodTemplateSpec) ([]byte, error) {
	labels, annotations := render.RunningPodMetadata(tpl)
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
}
