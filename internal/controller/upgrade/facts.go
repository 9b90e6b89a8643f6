package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// observed is what one reconcile reads from the cache once, for all nodes.
type observed struct {
	// driverPods maps a node to its driver pod.
	driverPods map[string]*corev1.Pod
	// hashes maps a driver DaemonSet to its pod template hash.
	hashes map[string]string
	// downstream counts, per node, the operand pods after the driver.
	downstream map[string]int
}

func (r *Reconciler) observe(ctx context.Context) (*observed, error) {
	o := &observed{driverPods: map[string]*corev1.Pod{}, hashes: map[string]string{}, downstream: map[string]int{}}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.Namespace), client.HasLabels{render.LabelState},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing operand pods: %w", err)
	}
	after := r.Graph.Downstream(state.Driver)
	for i := range pods.Items {
		p := &pods.Items[i]
		switch name := state.Name(p.Labels[render.LabelState]); {
		case name == state.Driver && p.DeletionTimestamp == nil:
			o.driverPods[p.Spec.NodeName] = p
		case slices.Contains(after, name):
			o.downstream[p.Spec.NodeName]++
		}
	}
	list := &appsv1.DaemonSetList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabels{render.LabelState: string(state.Driver)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing driver DaemonSets: %w", err)
	}
	for i := range list.Items {
		o.hashes[list.Items[i].Name] = list.Items[i].Spec.Template.Annotations[render.AnnotationTemplateHash]
	}
	return o, nil
}

// outdated reports whether a driver pod runs an older spec than its
// DaemonSet: only then does the node need an upgrade.
func (o *observed) outdated(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return false
	}
	want, ok := o.hashes[owner.Name]
	return ok && pod.Annotations[render.AnnotationTemplateHash] != want
}

// facts gathers what the state machine needs about a node. Workload pods
// are listed live, and only in the steps that look at them.
func (r *Reconciler) facts(ctx context.Context, cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node,
	spec *gpuv1.DriverUpgradePolicySpec) (upgrade.Facts, error) {
	st := stateOf(n)
	f := upgrade.Facts{State: st, Now: r.now(), Skip: n.Labels[gpuv1.LabelUpgradeSkip] == gpuv1.LabelTrue}
	f.Since = f.Now
	if t, err := time.Parse(time.RFC3339, n.Annotations[AnnotationSince]); err == nil {
		f.Since = t
	}
	pod := o.driverPods[n.Name]
	f.Outdated = (pod != nil && o.outdated(pod)) || (pod == nil && st == gpuv1.UpgradePodRestart)
	f.DownstreamPods = o.downstream[n.Name]
	var err error
	switch st {
	case gpuv1.UpgradeWaitForJobs:
		if sel := spec.WaitForCompletion.PodSelector; sel != "" {
			f.JobsRunning, err = r.countPods(ctx, n.Name, sel, func(*corev1.Pod) bool { return true })
		}
	case gpuv1.UpgradePodDeletion:
		f.GPUPods, err = r.countPods(ctx, n.Name, "", r.isGPUPod(cp, spec))
	case gpuv1.UpgradeDrainRequired:
		if f.GPUPods, err = r.countPods(ctx, n.Name, "", r.isGPUPod(cp, spec)); err == nil {
			f.DrainPods, err = r.countPods(ctx, n.Name, "", r.isDrainable(spec))
		}
	case gpuv1.UpgradeValidation:
		f.Validated = r.validated(o, n, pod)
	}
	return f, err
}

// validated reports whether the new driver works on the node: its pod is
// ready and current, the device plugin is ready again (unless disabled),
// and the node advertises its GPUs.
func (r *Reconciler) validated(o *observed, n *corev1.Node, pod *corev1.Pod) bool {
	if pod == nil || o.outdated(pod) || !podReady(pod) {
		return false
	}
	switch gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) {
	case gpuv1.StateDisabled:
		return true
	case gpuv1.StateReady:
		q, ok := n.Status.Allocatable["nvidia.com/gpu"]
		return ok && !q.IsZero()
	}
	return false
}

// countPods lists the live, unfinished pods on a node that match the label
// selector and the filter.
func (r *Reconciler) countPods(ctx context.Context, node, selector string, keep func(*corev1.Pod) bool) (int, error) {
	pods, err := r.podsOn(ctx, node, selector)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range pods {
		if keep(&pods[i]) {
			n++
		}
	}
	return n, nil
}

// podsOn lists a node's unfinished pods from the API server, by field
// selector, never from a cache.
func (r *Reconciler) podsOn(ctx context.Context, node, selector string) ([]corev1.Pod, error) {
	opts := []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)}}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, fmt.Errorf("pod selector %q: %w", selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	list := &corev1.PodList{}
	if err := r.APIReader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	out := list.Items[:0]
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// isGPUPod says which pods hold the GPU: they ask for an nvidia.com/
// resource, run with the operator's runtime class, or match the policy's
// extra selector. The operator's own operand pods never count.
func (r *Reconciler) isGPUPod(cp *gpuv1.ClusterPolicy, spec *gpuv1.DriverUpgradePolicySpec) func(*corev1.Pod) bool {
	extra, _ := labels.Parse(spec.PodDeletion.PodSelector)
	runtimeClass := string(cp.Spec.Operator.RuntimeClass)
	return func(p *corev1.Pod) bool {
		if r.isOperand(p) {
			return false
		}
		if p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == runtimeClass {
			return true
		}
		if spec.PodDeletion.PodSelector != "" && extra != nil && extra.Matches(labels.Set(p.Labels)) {
			return true
		}
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for name := range c.Resources.Limits {
				if strings.HasPrefix(string(name), "nvidia.com/") {
					return true
				}
			}
			for name := range c.Resources.Requests {
				if strings.HasPrefix(string(name), "nvidia.com/") {
					return true
				}
			}
		}
		return false
	}
}

// isDrainable says which pods a drain evicts: those matching its selector,
// except DaemonSet pods (their controller would put them back), static pods
// and the operator's operands.
func (r *Reconciler) isDrainable(spec *gpuv1.DriverUpgradePolicySpec) func(*corev1.Pod) bool {
	sel, _ := labels.Parse(spec.Drain.PodSelector)
	return func(p *corev1.Pod) bool {
		if r.isOperand(p) || isDaemonSetPod(p) || p.Annotations[corev1.MirrorPodAnnotationKey] != "" {
			return false
		}
		return sel == nil || sel.Matches(labels.Set(p.Labels))
	}
}

func (r *Reconciler) isOperand(p *corev1.Pod) bool {
	return p.Namespace == r.Namespace && p.Labels[render.LabelManagedBy] == render.ManagedBy
}

func isDaemonSetPod(p *corev1.Pod) bool {
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "DaemonSet"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
