package maintenance

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// observed is what one reconcile reads from the cache once, for all nodes.
type observed struct {
	// driverPods maps a node to its driver pod.
	driverPods map[string]*operandpods.Pod
	// hashes maps a driver DaemonSet to its pod template hash; deleting
	// holds the ones being deleted.
	hashes   map[string]string
	deleting map[string]bool
	// downstream counts, per node, the operand pods after the driver.
	downstream map[string]int
	// pluginPods maps a node to its device plugin pod, draPluginPods to
	// its DRA driver's kubelet plugin pod; servingPlugin picks the one of
	// the node's allocation mode.
	pluginPods, draPluginPods map[string]*operandpods.Pod
	// plugins counts, per node, the pods of either allocation mode's
	// plugins (the device plugin, the MPS daemon, the DRA driver's
	// kubelet plugin), terminating ones included: an allocation mode
	// switch starts the new mode's once none is left.
	plugins map[string]int
	// migClients counts, per node, the operand pods a MIG
	// reconfiguration takes off the node (those after mig-manager);
	// migManagers maps a node to its mig-manager pod, and
	// migManagerPods counts them, terminating ones included.
	migClients     map[string]int
	migManagers    map[string]*operandpods.Pod
	migManagerPods map[string]int
	// pools are the policy's driver pools; nil without a policy.
	pools *driverpool.Set
}

func (r *Reconciler) observe(ctx context.Context) (*observed, error) {
	o := &observed{driverPods: map[string]*operandpods.Pod{}, hashes: map[string]string{}, deleting: map[string]bool{},
		downstream: map[string]int{}, pluginPods: map[string]*operandpods.Pod{}, draPluginPods: map[string]*operandpods.Pod{},
		migClients: map[string]int{}, migManagers: map[string]*operandpods.Pod{}, migManagerPods: map[string]int{}, plugins: map[string]int{}}
	pods, err := r.Pods.All()
	if err != nil {
		return nil, err
	}
	after := r.Graph.Downstream(state.Driver)
	clients := r.Graph.Downstream(state.MIGManager)
	for _, p := range pods {
		if p.State == state.CUDAWorkload && p.Ended() {
			// A CUDA workload's record: it ended, and holds nothing on
			// its node.
			continue
		}
		if slices.Contains(clients, p.State) {
			o.migClients[p.Node]++
		}
		switch p.State {
		case state.DevicePlugin, state.MPSControlDaemon, state.DRADriver:
			o.plugins[p.Node]++
		}
		if p.State == state.MIGManager {
			o.migManagerPods[p.Node]++
			if p.DeletionTimestamp == nil {
				o.migManagers[p.Node] = p
			}
		}
		switch {
		case p.State == state.Driver && p.DeletionTimestamp == nil:
			o.driverPods[p.Node] = p
		case slices.Contains(after, p.State):
			o.downstream[p.Node]++
			switch {
			case p.DeletionTimestamp != nil:
			case p.State == state.DevicePlugin:
				o.pluginPods[p.Node] = p
			case p.State == state.DRADriver:
				o.draPluginPods[p.Node] = p
			}
		}
	}
	list := &appsv1.DaemonSetList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabels{render.LabelState: string(state.Driver)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing driver DaemonSets: %w", err)
	}
	for i := range list.Items {
		ds := &list.Items[i]
		o.hashes[ds.Name] = ds.Spec.Template.Annotations[render.AnnotationTemplateHash]
		o.deleting[ds.Name] = ds.DeletionTimestamp != nil
	}
	return o, nil
}

// outdated reports whether a node's driver pod is not the one the policy
// wants there: it runs an older spec than its DaemonSet, or it belongs to
// another DaemonSet than the node's (the node moved to another pool, a
// version switched between a tag and a digest renamed the DaemonSet), or to
// none (a pruned DaemonSet leaves its pods running: only the upgrade
// replaces a driver), unless the DaemonSet the node should run has the
// pod's name and template and will adopt it. Any of them makes the node
// need an upgrade.
func (o *observed) outdated(pod *operandpods.Pod, n *corev1.Node) bool {
	if o.pools != nil && o.pools.Assign(n.Name, n.Labels).Held() {
		// Two NVIDIADrivers select the node, or none: it keeps the
		// driver it runs until that is settled.
		return false
	}
	want, known := o.pools.DaemonSetFor(n.Name, n.Labels)
	if _, there := o.hashes[want]; known && (!there || o.deleting[want]) {
		// What would replace the driver is not there (yet, or for now: a
		// pool that cannot render): a node drained towards it would end
		// with no driver.
		return false
	}
	if pod.DaemonSet == "" || o.deleting[pod.DaemonSet] {
		// Orphaned, or its DaemonSet is going. One of the pod's own name
		// that the node should run, with the pod's template, adopts it:
		// waited for, not replaced. That is a DaemonSet pruned and applied
		// again, as when the policy hands the driver to NVIDIADrivers
		// before they are in the cache, or the same driver under another
		// owner.
		if !known || pod.Workload != want {
			return true
		}
		return pod.Annotation(render.AnnotationTemplateHash) != o.hashes[want]
	}
	hash, cached := o.hashes[pod.DaemonSet]
	if !cached {
		// Not in the cache yet, or deleted and its pods not yet orphaned:
		// the next look decides.
		return false
	}
	if known && pod.DaemonSet != want {
		return true
	}
	return pod.Annotation(render.AnnotationTemplateHash) != hash
}

// runsCurrent reports whether a node's driver pod is one the node's
// wanted DaemonSet made at its current spec: the positive of outdated,
// which also answers false where it cannot tell (a pool held by a
// conflict, a DaemonSet not there or going).
func (o *observed) runsCurrent(pod *operandpods.Pod, n *corev1.Node) bool {
	if o.pools == nil || o.pools.Assign(n.Name, n.Labels).Held() {
		return false
	}
	want, known := o.pools.DaemonSetFor(n.Name, n.Labels)
	hash, there := o.hashes[want]
	return known && there && !o.deleting[want] && pod.DaemonSet == want && pod.Annotation(render.AnnotationTemplateHash) == hash
}

// servingPlugin is the pod of the plugin that serves the node's GPUs in
// its allocation mode: the DRA driver's on a node in mode dra, the device
// plugin's otherwise. Both may run for a moment (a person's edit of the
// mode label, a DaemonSet controller behind); the other is not the one a
// repair restarts.
func (o *observed) servingPlugin(n *corev1.Node) *operandpods.Pod {
	if gating.AllocationModeOf(n) == gpuv1.AllocationDRA {
		return o.draPluginPods[n.Name]
	}
	return o.pluginPods[n.Name]
}
