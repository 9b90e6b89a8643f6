package clusterpolicy

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

const nfdWorkerName = nfd.WorkerName

// managedSelector selects every object the operator created.
var managedSelector = client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}

// rendered is every state's objects for a policy.
type rendered struct {
	// wanted are the objects of enabled states, to apply.
	wanted []client.Object
	// kinds are the kinds any state renders, enabled or not: the kinds to
	// look through when pruning.
	kinds []schema.GroupVersionKind
}

// renderAll renders every state. Disabled states are rendered too, only
// for their kinds, so their objects are found and pruned.
func (r *Reconciler) renderAll(cp *gpuv1.ClusterPolicy) (*rendered, error) {
	out := &rendered{}
	seen := map[schema.GroupVersionKind]bool{}
	for _, s := range r.Graph.States() {
		objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: r.Namespace, Gate: r.Graph.Gate(s.Name)})
		if err != nil {
			return nil, fmt.Errorf("rendering state %s: %w", s.Name, err)
		}
		for _, o := range objs {
			if gvk := o.GetObjectKind().GroupVersionKind(); !seen[gvk] {
				seen[gvk] = true
				out.kinds = append(out.kinds, gvk)
			}
		}
		if s.Operand.Enabled(&cp.Spec) {
			out.wanted = append(out.wanted, objs...)
		}
	}
	return out, nil
}

// applyStates applies the objects of enabled states and prunes the rest.
// Nothing is pruned when rendering failed: a policy the renderer cannot
// handle must not take down what runs.
func (r *Reconciler) applyStates(ctx context.Context, cp *gpuv1.ClusterPolicy) error {
	objs, err := r.renderAll(cp)
	if err != nil {
		return err
	}
	keep := make(map[apply.Key]bool, len(objs.wanted))
	var errs []error
	for _, o := range objs.wanted {
		keep[apply.KeyOf(o)] = true
		if _, err := r.Applier.Apply(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := r.Applier.Prune(ctx, objs.kinds, managedSelector, keep); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteObjects deletes every object the operator created.
func (r *Reconciler) deleteObjects(ctx context.Context, cp *gpuv1.ClusterPolicy) error {
	objs, err := r.renderAll(cp)
	if err != nil {
		return err
	}
	_, err = r.Applier.Prune(ctx, objs.kinds, managedSelector, nil)
	return err
}
