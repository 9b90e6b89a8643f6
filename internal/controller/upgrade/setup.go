package upgrade

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/coalesce"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// fleet is the one key of this controller: every reconcile looks at the
// whole fleet, because the budget is shared within a pool.
var fleet = reconcile.Request{NamespacedName: types.NamespacedName{Name: "driver-upgrades"}}

// fleetDelay batches the events that wake the fleet: a rollout or an
// upgrade changes thousands of operand pods and node labels, and each look
// at the fleet reads every GPU node. Steps are seconds apart anyway.
const fleetDelay = time.Second

// SetupWithManager registers the controller; a policy spec change, a new
// driver pod template, or any node or operand pod change, reconciles the
// fleet, at most about once per fleetDelay.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toFleet := coalesce.After(fleetDelay, func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleet}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("upgrade").
		Watches(&gpuv1.ClusterPolicy{}, toFleet, builder.WithPredicates(policy.SpecChanged())).
		// A driver DaemonSet's new template is what makes its pods
		// outdated: the policy change that led to it may have been looked
		// at before the DaemonSet was written, and OnDelete pods change
		// nothing by themselves.
		Watches(&appsv1.DaemonSet{}, toFleet, builder.WithPredicates(driverTemplates())).
		Watches(&corev1.Node{}, toFleet).
		Watches(&corev1.Pod{}, toFleet).
		Complete(r)
}

// driverTemplates passes the driver DaemonSets' creations, deletions and
// spec changes, not their status updates.
func driverTemplates() predicate.Predicate {
	isDriver := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[render.LabelState] == string(state.Driver)
	})
	return predicate.And(isDriver, predicate.GenerationChangedPredicate{})
}
