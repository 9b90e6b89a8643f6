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

// observePods returns the facts of each state's pod on the node, whether
// a driver pod there is terminating and unloads its driver, and the
// configuration digest of a driver pod restarting in place: terminating
// with the digest its DaemonSet's template still has, so that its
// successor keeps the loaded modules. A driver pod that is not ready but
// not going away is no restart in place: its container failed, and gets
// a short outage's grace, as before.
func (r *Reconciler) observePods(ctx context.Context, nodeName string, now time.Time) (
	facts map[state.Name]*state.PodFacts, unloading bool, restartDigest string, err error) {
	pods, err := r.Pods.OnNode(nodeName)
	if err != nil {
		return nil, false, "", err
	}
	hashes, err := r.templateHashes(ctx)
	if err != nil {
		return nil, false, "", err
	}
	for _, p := range pods {
		if p.State == state.Driver && p.DeletionTimestamp != nil {
			if p.ConfigDigest != "" && p.ConfigDigest == hashes[p.DaemonSet].hash {
				restartDigest = p.ConfigDigest
			} else {
				unloading = true
			}
		}
	}
	chosen := operandpods.PerState(pods)
	facts = make(map[state.Name]*state.PodFacts, len(chosen))
	for name, p := range chosen {
		// A state can run several DaemonSets, one per node variant. A
		// DaemonSet with OnDelete updates has no desired hash: its pods
		// are replaced by the operator, not rolled, so an older pod
		// there is still the state's pod.
		desired := ""
		if h := hashes[p.DaemonSet]; !h.onDelete {
			desired = h.hash
		}
		if f := p.Facts(render.AnnotationTemplateHash, desired, r.Timers.ReadyGrace, now); f != nil {
			facts[name] = f
		}
	}
	return facts, unloading, restartDigest, nil
}

// templateHash is an operand DaemonSet's pod template hash, and whether it
// replaces its pods only when they are deleted.
type templateHash struct {
	hash     string
	onDelete bool
}

// templateHashes returns each operand DaemonSet's template hash, by name.
func (r *Reconciler) templateHashes(ctx context.Context) (map[string]templateHash, error) {
	list := &appsv1.DaemonSetList{}
	// Read-only: the cache's objects, not copies of every pod template.
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.HasLabels{render.LabelState},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing operand DaemonSets: %w", err)
	}
	hashes := make(map[string]templateHash, len(list.Items))
	for i := range list.Items {
		ds := &list.Items[i]
		hashes[ds.Name] = templateHash{hash: ds.Spec.Template.Annotations[render.AnnotationTemplateHash],
			onDelete: ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType}
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
