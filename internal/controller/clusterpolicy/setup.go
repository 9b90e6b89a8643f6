package clusterpolicy

import (
	"context"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/coalesce"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// statusDelay batches the node label changes the status summarises: during
// a rollout they come by the thousand, and each reconcile reads every node.
const statusDelay = time.Second

// SetupWithManager registers the controller. Besides its own policies it
// watches the objects it owns (to restore them) and node label changes
// (they are what its status summarises, at most about once per
// statusDelay).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("clusterpolicy").
		For(&gpuv1.ClusterPolicy{}, builder.WithPredicates(beyondStatus())).
		// Owned objects are watched through the metadata informers the
		// applier reads them from: an event from another informer could
		// come before the applier's reader has the edit, and the applier
		// would take the edited object for the one it wrote.
		Owns(&appsv1.DaemonSet{}, builder.OnlyMetadata, builder.WithPredicates(beyondStatus())).
		Owns(&appsv1.Deployment{}, builder.OnlyMetadata, builder.WithPredicates(beyondStatus())).
		// The status counts the nfd-worker DaemonSet's pods: its status
		// changes are batched like the node labels.
		Watches(&appsv1.DaemonSet{}, coalesce.After(statusDelay, r.allPolicies),
			builder.WithPredicates(predicate.Not(beyondStatus()))).
		Watches(&corev1.Node{}, coalesce.After(statusDelay, r.allPolicies),
			builder.WithPredicates(labelsChanged())).
		// A device plugin configuration's new content rolls the pods that
		// read it, once validated.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfConfigMap)).
		// NVIDIADrivers are driver pools under driver.useNvidiaDriverCRD.
		Watches(&gpuv1alpha1.NVIDIADriver{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies),
			builder.WithPredicates(beyondStatus())).
		// A GPUCluster runs the DRA driver, with its settings.
		Watches(&gpuv1alpha1.GPUCluster{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies),
			builder.WithPredicates(policy.SpecChanged())).
		// The deletion of the active policy makes another the active one at
		// once: it adopts the objects before the deleted one lets go.
		Watches(&gpuv1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies),
			builder.WithPredicates(policy.DeletionStarted()))
	// The CUDA workload proof's PriorityClass and claim templates, on DRA
	// nodes: a proof pod naming a class that is gone is refused, and one
	// naming a template that is gone never gets its claim.
	b = b.Owns(&schedulingv1.PriorityClass{}, builder.OnlyMetadata, builder.WithPredicates(beyondStatus()))
	if r.served(render.KindResourceClaimTemplate) {
		b = b.Owns(&resourcev1.ResourceClaimTemplate{}, builder.OnlyMetadata, builder.WithPredicates(beyondStatus()))
	}
	if r.Pods != nil {
		// A precompiled image found renders its kernel's DaemonSet; the
		// NRI plugin's last pod gone takes its admission guard.
		b = b.WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(r.allPolicies),
			predicate.Or(driverpool.VerdictChanged(), toolkit.NRIPluginPodGone())))
	}
	return b.Complete(r)
}

// policiesOfConfigMap enqueues the policies whose devicePlugin.config,
// dcgmExporter.config, or one of whose driver pools' kernelModuleConfig,
// names the ConfigMap, and
// those with a devicePlugin.config or a dcgmExporter.config when it is the
// operator's copy of their files (restored when someone else edits it).
func (r *Reconciler) policiesOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.Namespace {
		return nil
	}
	list := &gpuv1.ClusterPolicyList{}
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ClusterPolicies after a ConfigMap change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		cp := &list.Items[i]
		if cfg := cp.Spec.DevicePlugin.Config; (cfg != nil && (cfg.Name == o.GetName() || o.GetName() == pluginconfig.ValidatedConfigMap)) ||
			(cp.Spec.DCGMExporter.Config.Named() != "" && (cp.Spec.DCGMExporter.Config.Named() == o.GetName() || o.GetName() == dcgmexporter.MetricsCopy)) ||
			r.namesModuleParams(ctx, cp, o.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: cp.Name}})
		}
	}
	return reqs
}

// namesModuleParams reports whether a driver pool of the policy reads its
// kernel module parameters from the named ConfigMap.
func (r *Reconciler) namesModuleParams(ctx context.Context, cp *gpuv1.ClusterPolicy, name string) bool {
	pools, err := driverpool.Load(ctx, r.Client, cp, nil)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing NVIDIADrivers after a ConfigMap change")
		return true // looked at again rather than missed
	}
	for i := range pools.Pools {
		if kmc := pools.Pools[i].Driver.KernelModuleConfig; kmc != nil && kmc.Name == name {
			return true
		}
	}
	return false
}

// beyondStatus passes every event but an update of status alone. The
// controller's own status writes must not wake it again at once: during a
// rollout each reconcile finds the status changed and writes it, and the
// write woke the next reconcile (909 status writes in the first 1000-node
// benchmark run). Owned objects changed by someone else still come back at
// once, to be restored.
func beyondStatus() predicate.Predicate {
	return predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		policy.DeletionStarted(),
		finalizersChanged(),
	)
}

func finalizersChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
		},
	}
}

// allPolicies enqueues every policy: a node change only changes the status
// of the active one, and the others are cheap to look at. It reads their
// names only: the cache's own, not a copy of each at every node change.
func (r *Reconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &gpuv1.ClusterPolicyList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ClusterPolicies after a node change")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

// labelsChanged passes node updates that change what the status
// summarises: labels, the unhealthy GPUs the node controller records, and
// why an operation waits to start on the node.
func labelsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
				old[gpuv1.AnnotationUnhealthyGPUs] != cur[gpuv1.AnnotationUnhealthyGPUs] ||
				old[gpuv1.AnnotationMaintenanceWaiting] != cur[gpuv1.AnnotationMaintenanceWaiting]
		},
	}
}
