package maintenance

import (
	"context"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/coalesce"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// fleet is the one key of this controller: every reconcile looks at the
// whole fleet, because the budget is shared within a pool.
var fleet = reconcile.Request{NamespacedName: types.NamespacedName{Name: "maintenance"}}

// fleetDelay batches the events that wake the fleet: a rollout changes
// thousands of operand pods and node labels, and each look at the fleet
// reads every GPU node.
const fleetDelay = time.Second

// minQuickDelay is the shortest wait after an event on a node in an
// operation's step: one step of each node per look, so a node's next step
// waits for the next look, and a wave of a small fleet is a chain of a
// few steps.
const minQuickDelay = 50 * time.Millisecond

// SetupWithManager registers the controller; a policy spec change, a new
// driver pod template, or any node or operand pod change, reconciles the
// fleet, at most about once per fleetDelay, but soon after a change on a
// node in an operation's step (its label written by the last look, its driver
// pod replaced, its operands back), which its next step waits for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toFleet := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{fleet} }
	batched := coalesce.After(fleetDelay, toFleet)
	nodeEvents := coalesce.Split(fleetDelay, r.quickDelay, func(_ context.Context, o client.Object) bool {
		return inStep(o.GetLabels())
	}, toFleet)
	podEvents := coalesce.Split(fleetDelay, r.quickDelay, r.onNodeInStep, toFleet)
	b := ctrl.NewControllerManagedBy(mgr)
	if slices, ok := r.Slices.(sliceSource); ok {
		// A repair of a DRA node reads its slices: the workers start once
		// they are listed (a look before would find none and read a queued
		// repair's GPUs as unknown), and a slice's change is looked at.
		b = b.WatchesRawSource(slices.Source(batched))
	}
	return b.
		Named("maintenance").
		Watches(&gpuv1.ClusterPolicy{}, batched, builder.WithPredicates(policy.SpecChanged())).
		// An NVIDIADriver's selector or budget moves nodes between pools
		// whose DaemonSets may already be there, unchanged.
		Watches(&gpuv1alpha1.NVIDIADriver{}, batched, builder.WithPredicates(policy.SpecChanged())).
		// A GPUCluster's coming and going changes every pool's mode.
		Watches(&gpuv1alpha1.GPUCluster{}, batched, builder.WithPredicates(policy.SpecChanged())).
		// A driver DaemonSet's new template is what makes its pods
		// outdated: the policy change that led to it may have been looked
		// at before the DaemonSet was written, and OnDelete pods change
		// nothing by themselves.
		Watches(&appsv1.DaemonSet{}, batched, builder.WithPredicates(driverTemplates())).
		Watches(&corev1.Node{}, nodeEvents, builder.WithPredicates(upgradeInputsChanged())).
		// The file of MIG configurations says which can be applied: a
		// refused one may become valid.
		Watches(&corev1.ConfigMap{}, batched, builder.WithPredicates(r.inNamespace())).
		WatchesRawSource(r.Pods.Source(podEvents)).
		Complete(r)
}

// quickDelay is how soon an event on an upgrading node brings the next
// look: at least minQuickDelay, and twice as long as the last look took,
// so that a large fleet in upgrade spends at most a third of its time
// looking however many events arrive.
func (r *Reconciler) quickDelay() time.Duration {
	return max(minQuickDelay, 2*time.Duration(r.lastLook.Load()))
}

// inStep reports whether a node's labels put it in a step of an
// operation, whose next step waits for a change on it.
func inStep(labels map[string]string) bool {
	return upgrade.InProgress(gpuv1.UpgradeState(labels[gpuv1.LabelUpgradeState])) ||
		remediation.InProgress(gpuv1.RemediationState(labels[gpuv1.LabelRemediationState])) ||
		migreconfig.InProgress(gpuv1.MIGReconfigureState(labels[gpuv1.LabelMIGReconfigureState])) ||
		modeswitch.InProgress(gpuv1.ModeSwitchState(labels[gpuv1.LabelModeSwitchState]))
}

// onNodeInStep reports whether an operand pod is on a node in a step of
// an operation, as the cache has the node.
func (r *Reconciler) onNodeInStep(ctx context.Context, o client.Object) bool {
	pod, ok := o.(*operandpods.Pod)
	if !ok || pod.Node == "" {
		return false
	}
	n := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Node}, n); err != nil {
		return false
	}
	return inStep(n.Labels)
}

// inNamespace passes objects of the operator's namespace.
func (r *Reconciler) inNamespace() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Namespace })
}

// driverTemplates passes the driver DaemonSets' creations, deletions and
// spec changes, not their status updates.
func driverTemplates() predicate.Predicate {
	isDriver := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[render.LabelState] == string(state.Driver)
	})
	return predicate.And(isDriver, predicate.GenerationChangedPredicate{})
}

// upgradeInputsChanged passes node events that can change a step: labels
// and annotations (upgrade and repair states, pools, gates, the node
// controller's states, MIG configurations), the cordon, the repair's, the
// reconfiguration's and the switch's taints, readiness, and the GPUs the node
// advertises (validation). A kubelet's status report that changes none of these, its
// heartbeat above all, wakes nothing.
func upgradeInputsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return !maps.Equal(old.Labels, cur.Labels) ||
				!maps.Equal(old.Annotations, cur.Annotations) ||
				old.Spec.Unschedulable != cur.Spec.Unschedulable ||
				slices.ContainsFunc(old.Spec.Taints, gating.IsOwnUnhealthyTaint) != slices.ContainsFunc(cur.Spec.Taints, gating.IsOwnUnhealthyTaint) ||
				slices.ContainsFunc(old.Spec.Taints, gating.IsOwnMIGTaint) != slices.ContainsFunc(cur.Spec.Taints, gating.IsOwnMIGTaint) ||
				slices.ContainsFunc(old.Spec.Taints, gating.IsOwnModeSwitchTaint) != slices.ContainsFunc(cur.Spec.Taints, gating.IsOwnModeSwitchTaint) ||
				nodeReady(old) != nodeReady(cur) ||
				!maps.Equal(gating.GPUResources(old.Status.Allocatable), gating.GPUResources(cur.Status.Allocatable)) ||
				!maps.Equal(gating.GPUResources(old.Status.Capacity), gating.GPUResources(cur.Status.Capacity))
		},
	}
}

// sliceSource is a SliceReader that controllers can watch
// (draslices.Index).
type sliceSource interface {
	Source(h handler.EventHandler, predicates ...predicate.Predicate) source.SyncingSource
}
