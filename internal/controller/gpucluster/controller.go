package gpucluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
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
	if gc.DeletionTimestamp != nil && !slices.Contains(gc.Finalizers, gpuv1alpha1.NVIDIAGPUClusterFinalizer) {
		return ctrl.Result{}, nil // going: nothing holds it
	}
	var st gpuv1alpha1.GPUClusterStatus
	if gc.DeletionTimestamp != nil {
		st = deletionHeld(gc)
	} else {
		var err error
		if st, err = r.status(ctx, gc); err != nil {
			return ctrl.Result{}, err
		}
	}
	if equality.Semantic.DeepEqual(st, gc.Status) {
		return ctrl.Result{}, nil
	}
	before := gc.DeepCopy()
	gc.Status = st
	if err := r.Client.Status().Patch(ctx, gc, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status of GPUCluster %s: %w", gc.Name, err)
	}
	// An event when the state changes, and when the reason does: a
	// notReady GPUCluster that comes to need a person says so.
	was, is := meta.FindStatusCondition(before.Status.Conditions, gpuv1alpha1.ConditionReady),
		meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionReady)
	if before.Status.State != st.State || was == nil || was.Reason != is.Reason {
		kind := corev1.EventTypeNormal
		if st.State != gpuv1alpha1.StateReady {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(gc, nil, kind, is.Reason, "Reconcile", "%s: %s", st.State, is.Message)
	}
	return ctrl.Result{}, nil
}

// status is the status of a GPUCluster not being deleted.
func (r *Reconciler) status(ctx context.Context, gc *gpuv1alpha1.GPUCluster) (gpuv1alpha1.GPUClusterStatus, error) {
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return gpuv1alpha1.GPUClusterStatus{}, err
	}
	var nodes []corev1.Node
	var pools *driverpool.Set
	if active != nil {
		if pools, err = driverpool.Load(ctx, r.Client, active, nil); err != nil {
			return gpuv1alpha1.GPUClusterStatus{}, err
		}
		list := &corev1.NodeList{}
		if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return gpuv1alpha1.GPUClusterStatus{}, fmt.Errorf("listing nodes: %w", err)
		}
		nodes = list.Items
	}
	return buildStatus(gc, active, r.DRAServed, pools, nodes, r.Namespace), nil
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
