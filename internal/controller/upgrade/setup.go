package upgrade

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/coalesce"
	"github.com/gpu-operator/gpu-operator/internal/policy"
)

// fleet is the one key of this controller: every reconcile looks at the
// whole fleet, because the budget is shared within a pool.
var fleet = reconcile.Request{NamespacedName: types.NamespacedName{Name: "driver-upgrades"}}

// fleetDelay batches the events that wake the fleet: a rollout or an
// upgrade changes thousands of operand pods and node labels, and each look
// at the fleet reads every GPU node. Steps are seconds apart anyway.
const fleetDelay = time.Second

// SetupWithManager registers the controller; a policy spec change, or any
// node or operand pod change, reconciles the fleet, at most about once per
// fleetDelay.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toFleet := coalesce.After(fleetDelay, func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleet}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("upgrade").
		Watches(&gpuv1.ClusterPolicy{}, toFleet, builder.WithPredicates(policy.SpecChanged())).
		Watches(&corev1.Node{}, toFleet).
		Watches(&corev1.Pod{}, toFleet).
		Complete(r)
}
