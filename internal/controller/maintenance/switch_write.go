package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
)

// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=deletecollection

// SwitchFieldOwner manages the switch's label and annotations, apart from
// the other operations': forgetting one never drops the others.
const SwitchFieldOwner = "gpu-operator-mode-switch"

// takeSwitch performs a step's action and records the node's next state.
// A failed action leaves the state as it is, to be retried.
// keep writes the state again with f.Since, its time kept forward while
// its validation is paused.
func (r *Reconciler) takeSwitch(ctx context.Context, p *pass, n *corev1.Node, f modeswitch.Facts,
	step modeswitch.Step, keep bool) (*corev1.Node, gpuv1.ModeSwitchState, error) {
	var err error
	switch step.Action {
	case modeswitch.EvictGPUPods:
		err = r.evict(ctx, n, switchEvent, p.gpuPodEviction(ctx, n, arbiter.ModeSwitch))
	case modeswitch.DeleteSlices:
		err = r.deleteSlices(ctx, n.Name)
	}
	if err != nil {
		return n, f.State, fmt.Errorf("node %s, %s: %w", n.Name, step.Action, err)
	}
	// The taint goes on before the label that starts the eviction and
	// comes off before the label that ends the switch: a restart between
	// the two writes takes the same decision again.
	node, err := r.patchSwitch(ctx, n, modeswitch.Tainted(step.Next))
	if node == nil {
		return n, f.State, err
	}
	a := n.Annotations
	// A since a person removed is written again: every step's timeout
	// counts from it.
	_, err = time.Parse(time.RFC3339, a[AnnotationSwitchSince])
	stamped := err == nil || step.Next == ""
	if step.Next == f.State && node == n && !keep && !step.Requeue && stamped && string(step.Target) == a[AnnotationSwitchTarget] &&
		string(step.Hold) == a[gpuv1.AnnotationModeSwitchHold] {
		return n, f.State, nil
	}
	written, err := r.writeSwitch(ctx, node, f, step, p.holdOf(node))
	if err != nil {
		return node, f.State, err
	}
	if step.Next != f.State {
		kind := corev1.EventTypeNormal
		if step.Next == gpuv1.ModeSwitchFailed || step.Requeue {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(n, nil, kind, switchEvent, "Switch", "%s -> %s: %s", displaySwitch(f.State), displaySwitch(step.Next), step.Reason)
	}
	return written, step.Next, nil
}

// patchSwitch adds or removes the operator's switching taint in a merge
// patch on the node's resourceVersion (taints are an atomic list that
// server-side apply would own whole). It returns the node to write the
// label on: n itself when nothing changed, the patched node otherwise, nil
// with errStale when the node changed meanwhile, nil with an error when
// the patch failed.
func (r *Reconciler) patchSwitch(ctx context.Context, n *corev1.Node, taint bool) (*corev1.Node, error) {
	if slices.ContainsFunc(n.Spec.Taints, gating.IsOwnModeSwitchTaint) == taint {
		return n, nil
	}
	return r.patchNode(ctx, n, SwitchFieldOwner, "the allocation mode switch taint", func(patched *corev1.Node) {
		setOwnTaint(patched, gating.ModeSwitchTaint, gating.IsOwnModeSwitchTaint, taint)
	})
}

// writeSwitch applies the node's switch label and annotations in one
// request on the version of the node the step was decided from (or its
// taint patched): a decision taken on a stale cache fails with a conflict
// (errStale) and is taken again.
func (r *Reconciler) writeSwitch(ctx context.Context, n *corev1.Node, f modeswitch.Facts, step modeswitch.Step, h hold) (*corev1.Node, error) {
	st := step.Next
	a := map[string]string{}
	set := func(key, value string) {
		if value != "" {
			a[key] = value
		}
	}
	since := f.Since
	if st != f.State {
		since = f.Now
	}
	set(AnnotationSwitchSince, since.UTC().Format(time.RFC3339))
	set(AnnotationSwitchTarget, string(step.Target))
	set(gpuv1.AnnotationModeSwitchHold, string(step.Hold))
	// The requeues count until the switch ends.
	requeues := f.Requeues
	if step.Requeue {
		requeues++
	}
	if requeues > 0 && (modeswitch.InProgress(st) || st == gpuv1.ModeSwitchRequired) {
		set(AnnotationSwitchRequeues, strconv.Itoa(requeues))
	}
	switch {
	case st == gpuv1.ModeSwitchFailed && f.State != st:
		set(gpuv1.AnnotationModeSwitchReason, step.Reason)
	case st == gpuv1.ModeSwitchFailed:
		set(gpuv1.AnnotationModeSwitchReason, n.Annotations[gpuv1.AnnotationModeSwitchReason])
	}
	labels := map[string]string{}
	if st != "" {
		labels[gpuv1.LabelModeSwitchState] = string(st)
	}
	h.mark(a, modeswitch.Tainted(st))
	ac := corev1ac.Node(n.Name).WithResourceVersion(n.ResourceVersion).WithLabels(labels).WithAnnotations(a)
	return r.apply(ctx, ac, SwitchFieldOwner, "the allocation mode switch state")
}

// deleteSlices deletes the ResourceSlices of NVIDIA's DRA drivers on the
// node, once no plugin of theirs runs there: the kubelet deletes a gone
// plugin's slices only after a grace period, and the node's new mode
// waits for them.
func (r *Reconciler) deleteSlices(ctx context.Context, node string) error {
	for _, driver := range []string{draslices.GPUDriver, draslices.ComputeDomainDriver} {
		sel := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", node), fields.OneTermEqualSelector("spec.driver", driver))
		if err := r.Client.DeleteAllOf(ctx, &resourcev1.ResourceSlice{}, client.MatchingFieldsSelector{Selector: sel}); err != nil {
			return fmt.Errorf("deleting the %s ResourceSlices of node %s: %w", driver, node, err)
		}
	}
	return nil
}

// forgetSwitch removes the switch's label, annotations and taint from a
// node the operator no longer switches: no policy, no longer a GPU node.
// The node controller then gives a node left in mode none its pool's mode:
// no plugin runs there. A node that changed meanwhile is errStale, looked
// at again.
func (r *Reconciler) forgetSwitch(ctx context.Context, n *corev1.Node) error {
	if !hasSwitchMarks(n) {
		return nil
	}
	node, err := r.patchSwitch(ctx, n, false)
	if node == nil {
		return err
	}
	_, err = r.apply(ctx, corev1ac.Node(n.Name).WithResourceVersion(node.ResourceVersion), SwitchFieldOwner, "the allocation mode switch's end")
	return err
}

// hasSwitchMarks reports whether a node carries anything of a switch.
func hasSwitchMarks(n *corev1.Node) bool {
	if _, ok := n.Labels[gpuv1.LabelModeSwitchState]; ok || slices.ContainsFunc(n.Spec.Taints, gating.IsOwnModeSwitchTaint) {
		return true
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, gpuv1.ModeSwitchAnnotationPrefix) {
			return true
		}
	}
	return false
}

func displaySwitch(s gpuv1.ModeSwitchState) string {
	if s == "" {
		return "in its pool's mode"
	}
	return string(s)
}
