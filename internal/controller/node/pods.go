package node

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// IndexNodeName indexes operand pods by the node they are bound to.
const IndexNodeName = "spec.nodeName"

// observePods returns the facts of each state's pod on the node, and
// whether a driver pod there is terminating (its driver is unloading).
func (r *Reconciler) observePods(ctx context.Context, nodeName string, now time.Time) (map[state.Name]*state.PodFacts, bool, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.Namespace),
		client.MatchingFields{IndexNodeName: nodeName}, client.HasLabels{render.LabelState}); err != nil {
		return nil, false, fmt.Errorf("listing operand pods on node %s: %w", nodeName, err)
	}
	hashes, err := r.desiredHashes(ctx)
	if err != nil {
		return nil, false, err
	}
	chosen := map[state.Name]*corev1.Pod{}
	unloading := false
	for i := range pods.Items {
		p := &pods.Items[i]
		name := state.Name(p.Labels[render.LabelState])
		unloading = unloading || (name == state.Driver && p.DeletionTimestamp != nil)
		if cur, ok := chosen[name]; !ok || newer(p, cur) {
			chosen[name] = p
		}
	}
	facts := make(map[state.Name]*state.PodFacts, len(chosen))
	for name, p := range chosen {
		if f := state.Observe(p, render.AnnotationTemplateHash, hashes[ownerOf(p)], r.Grace, now); f != nil {
			facts[name] = f
		}
	}
	return facts, unloading, nil
}

// ownerOf names the DaemonSet a pod belongs to; a state can run several,
// one per node variant.
func ownerOf(p *corev1.Pod) string {
	if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" {
		return owner.Name
	}
	return ""
}

// newer prefers a live pod to a terminating one, then the newest: during a
// rolling update the replacement is the pod that matters.
func newer(p, than *corev1.Pod) bool {
	if (p.DeletionTimestamp == nil) != (than.DeletionTimestamp == nil) {
		return p.DeletionTimestamp == nil
	}
	return than.CreationTimestamp.Before(&p.CreationTimestamp)
}

// desiredHashes returns the pod template hash of each operand DaemonSet,
// by name. A DaemonSet with OnDelete updates gets none: its pods are
// replaced by the operator, not rolled, so an older pod there is still the
// state's pod.
func (r *Reconciler) desiredHashes(ctx context.Context) (map[string]string, error) {
	list := &appsv1.DaemonSetList{}
	// Read-only: the cache's objects, not copies of every pod template.
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.HasLabels{render.LabelState},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing operand DaemonSets: %w", err)
	}
	hashes := make(map[string]string, len(list.Items))
	for i := range list.Items {
		ds := &list.Items[i]
		if ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			continue
		}
		hashes[ds.Name] = ds.Spec.Template.Annotations[render.AnnotationTemplateHash]
	}
	return hashes, nil
}

// deleteStalePods deletes pods that stayed ready from before their state was
// reset; their DaemonSet starts fresh ones.
func (r *Reconciler) deleteStalePods(ctx context.Context, nodeName string, stale []state.Name) error {
	if len(stale) == 0 {
		return nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.Namespace), client.MatchingFields{IndexNodeName: nodeName}); err != nil {
		return fmt.Errorf("listing operand pods on node %s: %w", nodeName, err)
	}
	for _, name := range stale {
		for i := range pods.Items {
			p := &pods.Items[i]
			if state.Name(p.Labels[render.LabelState]) != name || p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("restarting stale pod %s: %w", p.Name, err)
			}
		}
	}
	return nil
}
