package gpucluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/coalesce"
	"github.com/gpu-operator/gpu-operator/internal/policy"
)

// statusDelay batches the node label changes the status counts.
const statusDelay = time.Second

// +kubebuilder:rbac:groups=nvidia.com,resources=gpuclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=nvidia.com,resources=gpuclusters/status,verbs=get;patch

// Reconciler writes the GPUCluster's status.
type Reconciler struct {
	Client    client.Client
	Namespace string
	Recorder  events.EventRecorder
	// DRAServed is true when the API server serves resource.k8s.io/v1
	// ResourceSlices (the operator reads it at start).
	DRAServed bool
}

// Reconcile writes the GPUCluster's status, and an event when its state
// changes. Nothing is written when nothing changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gc := &gpuv1alpha1.GPUCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, gc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if gc.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	var nodes []corev1.Node
	if active != nil {
		list := &corev1.NodeList{}
		if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
		}
		nodes = list.Items
	}
	st := buildStatus(gc, active, r.DRAServed, nodes, r.Namespace)
	if equality.Semantic.DeepEqual(st, gc.Status) {
		return ctrl.Result{}, nil
	}
	before := gc.DeepCopy()
	gc.Status = st
	if err := r.Client.Status().Patch(ctx, gc, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status of GPUCluster %s: %w", gc.Name, err)
	}
	if before.Status.State != st.State {
		kind := corev1.EventTypeNormal
		if st.State != gpuv1alpha1.StateReady {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(gc, nil, kind, "StateChanged", "Reconcile", "%s: %s", st.State, readyMessage(st))
	}
	return ctrl.Result{}, nil
}

func readyMessage(st gpuv1alpha1.GPUClusterStatus) string {
	for _, c := range st.Conditions {
		if c.Type == gpuv1alpha1.ConditionReady {
			return c.Message
		}
	}
	return ""
}

// SetupWithManager registers the controller: the GPUCluster, the
// ClusterPolicies (the one it lies over may come or go), and node label
// changes, batched.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("gpucluster").
		For(&gpuv1alpha1.GPUCluster{}, builder.WithPredicates(policy.SpecChanged())).
		Watches(&gpuv1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(theGPUCluster),
			builder.WithPredicates(predicate.Or(policy.SpecChanged(), policy.CreatedOrDeleted()))).
		Watches(&corev1.Node{}, coalesce.After(statusDelay, theGPUCluster), builder.WithPredicates(policy.LabelsChanged())).
		Complete(r)
}

// theGPUCluster enqueues the one GPUCluster there can be; a request for
// one that does not exist costs a cache read.
func theGPUCluster(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: gpuv1alpha1.GPUClusterName}}}
}
