package maintenance

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// podSelectors are the upgrade policy's pod selectors, parsed once per
// look at a pool.
type podSelectors struct {
	// waitFor selects the jobs to wait for; nil waits for none.
	waitFor labels.Selector
	// gpuExtra selects further GPU pods; nil adds none.
	gpuExtra labels.Selector
	// drain selects the pods a drain evicts: every pod when empty.
	drain labels.Selector
}

// parseSelectors parses the policy's selectors. The API server refuses a
// selector the operator cannot parse; one stored before that rule existed
// is an error that stops the pool's upgrades, never a selector that
// matches nothing, or everything, in its place.
func parseSelectors(spec *gpuv1.DriverUpgradePolicySpec) (*podSelectors, error) {
	parse := func(field string, s gpuv1.PodSelector, empty labels.Selector) (labels.Selector, error) {
		if s == "" {
			return empty, nil
		}
		sel, err := labels.Parse(string(s))
		if err != nil {
			return nil, fmt.Errorf("spec.driver.upgradePolicy.%s %q is not a label selector: %w", field, s, err)
		}
		return sel, nil
	}
	out := &podSelectors{}
	var err error
	if out.waitFor, err = parse("waitForCompletion.podSelector", spec.WaitForCompletion.PodSelector, nil); err != nil {
		return nil, err
	}
	if out.gpuExtra, err = parse("podDeletion.podSelector", spec.PodDeletion.PodSelector, nil); err != nil {
		return nil, err
	}
	if out.drain, err = parse("drain.podSelector", spec.Drain.PodSelector, labels.Everything()); err != nil {
		return nil, err
	}
	return out, nil
}

// countPods lists the live, unfinished pods on a node that match the label
// selector and the filter.
func (r *Reconciler) countPods(ctx context.Context, node string, selector labels.Selector, keep func(*corev1.Pod) bool) (int, error) {
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
// selector, never from a cache; a nil label selector selects every pod.
func (r *Reconciler) podsOn(ctx context.Context, node string, selector labels.Selector) ([]corev1.Pod, error) {
	opts := []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)}}
	if selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: selector})
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

// gpuPods says which pods hold the GPU: they ask for an nvidia.com/
// resource, run with the operator's runtime class, name CDI devices for
// the toolkit's NRI plugin to inject (nvidia.cdi.k8s.io/ annotations),
// match the policy's extra selector, or hold a device of NVIDIA's DRA
// driver through a ResourceClaim (holdsNVIDIAClaim). The operator's own
// operand pods never count. DaemonSet pods count only with daemonSets,
// for the operations that taint the node (pass.gpuPodEviction): under a
// cordon alone their controller puts them back at once, so evicting them
// cannot free the node, and waiting for them would fail every node at the
// deletion timeout. One that holds the GPU through a driver upgrade keeps
// the old driver loaded: the new driver container cannot unload it and
// crash-loops, and the upgrade's validation fails the node saying so.
func (r *Reconciler) gpuPods(ctx context.Context, cp *gpuv1.ClusterPolicy, extra labels.Selector, daemonSets bool) func(*corev1.Pod) bool {
	runtimeClass := string(cp.Spec.Operator.RuntimeClass)
	return func(p *corev1.Pod) bool {
		if r.isOperand(p) || (!daemonSets && isDaemonSetPod(p)) {
			return false
		}
		if p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == runtimeClass {
			return true
		}
		if extra != nil && extra.Matches(labels.Set(p.Labels)) {
			return true
		}
		for k := range p.Annotations {
			if strings.HasPrefix(k, state.NRIDevicesAnnotationPrefix) {
				return true
			}
		}
		return gating.RequestsNVIDIAResource(p) || r.holdsNVIDIAClaim(ctx, p)
	}
}

// isDrainable says which pods a drain evicts: those matching its selector,
// except DaemonSet pods (their controller would put them back), static pods
// and the operator's operands.
func (r *Reconciler) isDrainable(sel labels.Selector) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		if r.isOperand(p) || isDaemonSetPod(p) || p.Annotations[corev1.MirrorPodAnnotationKey] != "" {
			return false
		}
		return sel.Matches(labels.Set(p.Labels))
	}
}

func (r *Reconciler) isOperand(p *corev1.Pod) bool {
	return p.Namespace == r.Namespace && p.Labels[render.LabelManagedBy] == render.ManagedBy
}

func isDaemonSetPod(p *corev1.Pod) bool {
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "DaemonSet"
}
