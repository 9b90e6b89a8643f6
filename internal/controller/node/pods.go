package node

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// observePods returns the facts of each state's pod on the node, and
// whether a driver pod there is terminating (its driver is unloading).
func (r *Reconciler) observePods(ctx context.Context, nodeName string, now time.Time) (map[state.Name]*state.PodFacts, bool, error) {
	pods, err := r.Pods.OnNode(nodeName)
	if err != nil {
		return nil, false, err
	}
	hashes, err := r.desiredHashes(ctx)
	if err != nil {
		return nil, false, err
	}
	chosen := map[state.Name]*operandpods.Pod{}
	unloading := false
	for _, p := range pods {
		if p.State == "" {
			continue
		}
		unloading = unloading || (p.State == state.Driver && p.DeletionTimestamp != nil)
		if cur, ok := chosen[p.State]; !ok || p.Newer(cur) {
			chosen[p.State] = p
		}
	}
	facts := make(map[state.Name]*state.PodFacts, len(chosen))
	for name, p := range chosen {
		// A state can run several DaemonSets, one per node variant.
		if f := p.Facts(render.AnnotationTemplateHash, hashes[p.DaemonSet], r.Timers.ReadyGrace, now); f != nil {
			facts[name] = f
		}
	}
	return facts, unloading, nil
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
	pods, err := r.Pods.OnNode(nodeName)
	if err != nil {
		return err
	}
	for _, name := range stale {
		for _, p := range pods {
			if p.State != name || p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, p.Ref(), client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("restarting stale pod %s: %w", p.Name, err)
			}
		}
	}
	return nil
}
