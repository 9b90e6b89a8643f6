package node

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// SetupWithManager registers the controller. It reacts to node changes that
// matter (labels, operator annotations, boot ID), to operand pods on a
// node, and to ClusterPolicy spec changes, which concern every GPU node.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Slices != nil {
		// The DRA driver's slices prove it on its node.
		b = b.WatchesRawSource(r.Slices.Source(handler.EnqueueRequestsFromMapFunc(sliceToNode)))
	}
	return b.
		Named("node").
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged())).
		WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(podToNode))).
		// A CUDA workload that ended frees a place for a node waiting.
		WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(r.nodeWaitingForAPlace), workloadEnded())).
		// A precompiled image's verdict concerns every node that boots
		// its kernel, not the one node its check ran on.
		WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(r.allGPUNodes), driverpool.VerdictChanged())).
		Watches(&gpuv1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allGPUNodes),
			builder.WithPredicates(policy.SpecChanged())).
		// NVIDIADrivers decide the nodes' driver pools under
		// driver.useNvidiaDriverCRD.
		Watches(&gpuv1alpha1.NVIDIADriver{}, handler.EnqueueRequestsFromMapFunc(r.allGPUNodes),
			builder.WithPredicates(policy.SpecChanged())).
		// A GPUCluster puts every pool in allocation mode dra.
		Watches(&gpuv1alpha1.GPUCluster{}, handler.EnqueueRequestsFromMapFunc(r.allGPUNodes),
			builder.WithPredicates(policy.SpecChanged())).
		// The device plugin's ConfigMap says which configurations nodes
		// may run.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.nodesOfDevicePluginConfigs)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// nodeWaitingForAPlace enqueues the node that has waited longest for a
// place among the CUDA workloads running at once.
func (r *Reconciler) nodeWaitingForAPlace(context.Context, client.Object) []reconcile.Request {
	node, ok := r.workloads.wakeNext()
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: node}}}
}

// workloadEnded passes a CUDA workload pod's end (Succeeded, Failed) and
// its deletion: each frees a place.
func workloadEnded() predicate.Predicate {
	isWorkload := func(o client.Object) (*operandpods.Pod, bool) {
		p, ok := o.(*operandpods.Pod)
		return p, ok && p.State == state.CUDAWorkload
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			_, ok := isWorkload(e.Object)
			return ok
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok := isWorkload(e.ObjectOld)
			cur, _ := isWorkload(e.ObjectNew)
			return ok && cur != nil && !old.Ended() && cur.Ended()
		},
	}
}

func sliceToNode(_ context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*draslices.Slice)
	if !ok || s.Node == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: s.Node}}}
}

func podToNode(_ context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*operandpods.Pod)
	if !ok || p.Node == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p.Node}}}
}

// allGPUNodes enqueues every node the operator has or should have labels
// on. It only reads the nodes: the cache's own, not a copy of the fleet.
func (r *Reconciler) allGPUNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing nodes after a ClusterPolicy change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if gating.IsGPUNode(n) || hasOperatorMarks(n) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
		}
	}
	return reqs
}

// nodesOfDevicePluginConfigs enqueues every GPU node when the ConfigMap is
// the active policy's devicePlugin.config, or the operator's validated
// copy of its files.
func (r *Reconciler) nodesOfDevicePluginConfigs(ctx context.Context, o client.Object) []reconcile.Request {
	active, err := policy.Active(ctx, r.Client)
	if err != nil || active == nil || o.GetNamespace() != r.Namespace {
		return nil
	}
	if cfg := active.Spec.DevicePlugin.Config; cfg == nil || (cfg.Name != o.GetName() && o.GetName() != pluginconfig.ValidatedConfigMap) {
		return nil
	}
	return r.allGPUNodes(ctx, o)
}

// hasOperatorMarks reports whether the operator left a state label, an
// annotation or its readiness taint on the node, which it must remove when
// no policy wants them.
func hasOperatorMarks(n *corev1.Node) bool {
	if slices.ContainsFunc(n.Spec.Taints, gating.IsOwnReadinessTaint) {
		return true
	}
	for k := range n.Labels {
		if strings.HasPrefix(k, gpuv1.StateLabelPrefix) {
			return true
		}
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) {
			return true
		}
	}
	return false
}

// nodeChanged passes node events that can change a decision: labels,
// annotations, a reboot, the runtime and its handlers, the GPUs the node
// advertises, the readiness taint. Kubelet status heartbeats do not.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return !maps.Equal(old.Labels, cur.Labels) ||
				!maps.Equal(old.Annotations, cur.Annotations) ||
				old.Status.NodeInfo.BootID != cur.Status.NodeInfo.BootID ||
				old.Status.NodeInfo.ContainerRuntimeVersion != cur.Status.NodeInfo.ContainerRuntimeVersion ||
				!slices.Equal(handlerNames(old), handlerNames(cur)) ||
				!maps.Equal(gating.GPUResources(old.Status.Allocatable), gating.GPUResources(cur.Status.Allocatable)) ||
				!maps.Equal(gating.GPUResources(old.Status.Capacity), gating.GPUResources(cur.Status.Capacity)) ||
				slices.ContainsFunc(old.Spec.Taints, gating.HasReadinessTaintKey) != slices.ContainsFunc(cur.Spec.Taints, gating.HasReadinessTaintKey)
		},
	}
}

func handlerNames(n *corev1.Node) []string {
	names := make([]string, len(n.Status.RuntimeHandlers))
	for i, h := range n.Status.RuntimeHandlers {
		names[i] = h.Name
	}
	return names
}
