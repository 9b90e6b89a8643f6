package nvidiadriver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/policy"
)

// statusDelay batches the node label changes the status counts.
const statusDelay = time.Second

// +kubebuilder:rbac:groups=nvidia.com,resources=nvidiadrivers,verbs=get;list;watch
// +kubebuilder:rbac:groups=nvidia.com,resources=nvidiadrivers/status,verbs=get;patch

// Reconciler writes each NVIDIADriver's status.
type Reconciler struct {
	Client    client.Client
	Namespace string
	Recorder  events.EventRecorder
	// Pods are the operand pods: the status reads the precompiled
	// images' checks from them. Nil reads none.
	Pods *operandpods.Index
}

// Reconcile writes one NVIDIADriver's status, and an event when its
// conflicts start or end. Nothing is written when nothing changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nvd := &gpuv1alpha1.NVIDIADriver{}
	if err := r.Client.Get(ctx, req.NamespacedName, nvd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if nvd.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	var pools *driverpool.Set
	var nodes []corev1.Node
	if notManaged(active) == "" {
		if pools, err = driverpool.Load(ctx, r.Client, active, r.Pods); err != nil {
			return ctrl.Result{}, err
		}
		list := &corev1.NodeList{}
		if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
		}
		nodes = list.Items
	}
	missing, err := r.missingConfig(ctx, nvd)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := buildStatus(nvd, active, pools, nodes, r.Namespace, missing)
	if equality.Semantic.DeepEqual(st, nvd.Status) {
		return ctrl.Result{}, nil
	}
	before := nvd.DeepCopy()
	nvd.Status = st
	if err := r.Client.Status().Patch(ctx, nvd, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status of NVIDIADriver %s: %w", nvd.Name, err)
	}
	r.tell(nvd, before.Status, st)
	return ctrl.Result{}, nil
}

// missingConfig returns the name of the kernelModuleConfig ConfigMap the
// NVIDIADriver names when it does not exist.
func (r *Reconciler) missingConfig(ctx context.Context, nvd *gpuv1alpha1.NVIDIADriver) (string, error) {
	name := nvd.Spec.KernelModuleConfig.Named()
	if name == "" {
		return "", nil
	}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &corev1.ConfigMap{})
	switch {
	case apierrors.IsNotFound(err):
		return name, nil
	case err != nil:
		return "", fmt.Errorf("reading ConfigMap %s: %w", name, err)
	}
	return "", nil
}

// tell records an event when the NVIDIADriver's conflicts start, change or
// end, and when its state changes.
func (r *Reconciler) tell(nvd *gpuv1alpha1.NVIDIADriver, before, after gpuv1alpha1.NVIDIADriverStatus) {
	ready := func(s gpuv1alpha1.NVIDIADriverStatus) string {
		for _, c := range s.Conditions {
			if c.Type == gpuv1alpha1.ConditionReady {
				return c.Message
			}
		}
		return ""
	}
	switch {
	case len(after.Conflicts) > 0 && !equality.Semantic.DeepEqual(before.Conflicts, after.Conflicts):
		r.Recorder.Eventf(nvd, nil, corev1.EventTypeWarning, gpuv1alpha1.ReasonConflictingNodeSelector, "Reconcile", "%s", ready(after))
	case len(before.Conflicts) > 0 && len(after.Conflicts) == 0:
		r.Recorder.Eventf(nvd, nil, corev1.EventTypeNormal, "ConflictResolved", "Reconcile",
			"no GPU node is selected by another NVIDIADriver any more: %s", ready(after))
	case before.State != after.State:
		kind := corev1.EventTypeNormal
		if after.State == gpuv1alpha1.StateNotReady {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(nvd, nil, kind, "StateChanged", "Reconcile", "%s: %s", after.State, ready(after))
	}
}

// SetupWithManager registers the controller: its own resources (any
// change to one can move nodes between all of them), the ClusterPolicies,
// and node label changes, batched.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("nvidiadriver").
		For(&gpuv1alpha1.NVIDIADriver{}, builder.WithPredicates(policy.SpecChanged())).
		Watches(&gpuv1alpha1.NVIDIADriver{}, handler.EnqueueRequestsFromMapFunc(r.all),
			builder.WithPredicates(policy.SpecChanged())).
		Watches(&gpuv1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(r.all),
			builder.WithPredicates(predicate.Or(policy.SpecChanged(), policy.CreatedOrDeleted()))).
		Watches(&corev1.Node{}, coalesce.After(statusDelay, r.all), builder.WithPredicates(policy.LabelsChanged())).
		// A kernelModuleConfig ConfigMap created or deleted.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.all), builder.WithPredicates(policy.CreatedOrDeleted()))
	if r.Pods != nil {
		// The status says which kernels have no precompiled image.
		b = b.WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(r.all), driverpool.VerdictChanged()))
	}
	return b.Complete(r)
}

// all enqueues every NVIDIADriver.
func (r *Reconciler) all(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &gpuv1alpha1.NVIDIADriverList{}
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing NVIDIADrivers")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}
