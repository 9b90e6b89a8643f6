package upgrade

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// fleet is the one key of this controller: every reconcile looks at the
// whole fleet, because the budget is shared within a pool.
var fleet = reconcile.Request{NamespacedName: types.NamespacedName{Name: "driver-upgrades"}}

// SetupWithManager registers the controller; any policy, node or operand pod
// change reconciles the fleet.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toFleet := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleet}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("upgrade").
		Watches(&gpuv1.ClusterPolicy{}, toFleet).
		Watches(&corev1.Node{}, toFleet).
		Watches(&corev1.Pod{}, toFleet).
		Complete(r)
}
