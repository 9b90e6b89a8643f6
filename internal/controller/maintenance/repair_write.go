package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
)

// RemediationFieldOwner manages the remediation label and annotations,
// apart from the upgrade's: forgetting one never drops the other.
const RemediationFieldOwner = "gpu-operator-remediation"

// takeRemediation performs a step's action and records the node's next
// state. A failed action leaves the state as it is, to be retried.
// keep writes the state again with f.Since, its time kept forward while
// its validation is paused.
func (r *Reconciler) takeRemediation(ctx context.Context, p *pass, n *corev1.Node,
	f remediation.Facts, step remediation.Step, keep bool) (*corev1.Node, gpuv1.RemediationState, error) {
	obs := p.obs
	var err error
	switch step.Action {
	case remediation.EvictGPUPods:
		err = r.evict(ctx, n, remediationEvent, p.gpuPodEviction(ctx, n, arbiter.Repair))
	case remediation.RestartDevicePlugin:
		err = r.deletePod(ctx, obs.servingPlugin(n))
	case remediation.DeleteDriverPod:
		err = r.deletePod(ctx, obs.driverPods[n.Name])
	}
	if err != nil {
		return n, f.State, fmt.Errorf("node %s, %s: %w", n.Name, step.Action, err)
	}
	// The taint goes on before the label that starts the eviction and
	// comes off before the label that ends the repair: a restart between
	// the two writes takes the same decision again. The approval is spent
	// only once the label says the repair started, so that a write that
	// did not land loses no approval.
	node, err := r.patchTaint(ctx, n, remediation.Tainted(step.Next), f.Approved && remediation.InProgress(f.State))
	if node == nil {
		return n, f.State, err
	}
	if step.Next == f.State && node == n && !keep {
		return n, f.State, nil
	}
	written, err := r.writeRemediation(ctx, node, obs, f, step, p.holdOf(node))
	if err != nil {
		return node, f.State, err
	}
	if step.Next != f.State {
		kind := corev1.EventTypeNormal
		if step.Next == gpuv1.RemediationRebootRequired || step.Next == gpuv1.RemediationFailed {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(n, nil, kind, remediationEvent, "Remediate", "%s -> %s: %s",
			displayRemediation(f.State), displayRemediation(step.Next), step.Reason)
	}
	return written, step.Next, nil
}

// patchTaint adds or removes the operator's unhealthy taint, and spends
// the approval, in one merge patch on the node's resourceVersion: taints
// are an atomic list that server-side apply would own whole, and the
// approval annotation is the person's, not the operator's field. It
// returns the node to write the label on: n itself when nothing changed,
// the patched node otherwise, nil with errStale when the node changed
// meanwhile, nil with an error when the patch failed.
func (r *Reconciler) patchTaint(ctx context.Context, n *corev1.Node, want, spendApproval bool) (*corev1.Node, error) {
	has := slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint)
	if has == want && !spendApproval {
		return n, nil
	}
	return r.patchNode(ctx, n, RemediationFieldOwner, "the unhealthy taint", func(patched *corev1.Node) {
		setOwnTaint(patched, gating.UnhealthyTaint, gating.IsOwnUnhealthyTaint, want)
		if spendApproval {
			delete(patched.Annotations, gpuv1.AnnotationRemediationApproved)
		}
	})
}

// patchNode changes a copy of the node and writes it with a merge patch
// conditional on the node's resourceVersion: for taints, an atomic list
// that server-side apply would own whole, and for fields that are not the
// operator's to keep. It returns the patched node, nil with errStale when
// the node changed meanwhile, nil with an error when the patch failed.
func (r *Reconciler) patchNode(ctx context.Context, n *corev1.Node, owner, what string, change func(*corev1.Node)) (*corev1.Node, error) {
	patched := n.DeepCopy()
	change(patched)
	err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{}), client.FieldOwner(owner))
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil, errStale
	case err != nil:
		return nil, fmt.Errorf("writing %s of node %s: %w", what, n.Name, err)
	}
	return r.remember(n.ResourceVersion, patched), nil
}

// setOwnTaint adds the operator's taint to a node, or removes it; a taint
// of the key that is someone else's is left alone.
func setOwnTaint(n *corev1.Node, taint corev1.Taint, own func(corev1.Taint) bool, want bool) {
	has := slices.ContainsFunc(n.Spec.Taints, own)
	switch {
	case want && !has:
		n.Spec.Taints = append(n.Spec.Taints, taint)
	case !want && has:
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, own)
	}
}

// writeRemediation applies the node's remediation label and annotations
// in one request on the version of the node the step was decided from (or
// its taint patched): a decision taken on a stale cache fails with a
// conflict (errStale) and is taken again.
func (r *Reconciler) writeRemediation(ctx context.Context, n *corev1.Node, obs *observed, f remediation.Facts,
	step remediation.Step, h hold) (*corev1.Node, error) {
	st := step.Next
	since := f.Since
	if st != f.State {
		since = f.Now
	}
	annotations := map[string]string{}
	if st != "" {
		annotations[AnnotationRemediationSince] = since.UTC().Format(time.RFC3339)
	}
	keep := func(key string) {
		if v := n.Annotations[key]; v != "" {
			annotations[key] = v
		}
	}
	keep(AnnotationLastRepaired)
	if remediation.Tainted(st) {
		keep(AnnotationExpectedGPUs)
		keep(AnnotationExpectedLayout)
	}
	switch {
	case st == f.State:
		keep(AnnotationReplacedPod)
		keep(AnnotationBootID)
		keep(AnnotationReason)
	case st == gpuv1.RemediationEviction:
		if annotations[AnnotationExpectedGPUs] == "" {
			annotations[AnnotationExpectedGPUs] = strconv.FormatInt(r.gpusOf(n).registered, 10)
			if applied := n.Annotations[gpuv1.AnnotationMIGApplied]; applied != "" {
				annotations[AnnotationExpectedLayout] = applied
			}
		}
	case st == gpuv1.RemediationDone:
		annotations[AnnotationLastRepaired] = f.Now.UTC().Format(time.RFC3339)
	case st == gpuv1.RemediationDevicePluginRestart:
		if pod := obs.servingPlugin(n); pod != nil {
			annotations[AnnotationReplacedPod] = string(pod.UID)
		}
	case st == gpuv1.RemediationDriverReload:
		if pod := obs.driverPods[n.Name]; pod != nil {
			annotations[AnnotationReplacedPod] = string(pod.UID)
		}
	case st == gpuv1.RemediationRebootRequired || st == gpuv1.RemediationFailed:
		annotations[AnnotationBootID] = n.Status.NodeInfo.BootID
		annotations[AnnotationReason] = step.Reason
	case st == gpuv1.RemediationValidation && f.Rebooted:
		keep(AnnotationBootID) // this validation validates a reboot
	}
	labels := map[string]string{}
	if st != "" {
		labels[gpuv1.LabelRemediationState] = string(st)
	}
	h.mark(annotations, remediation.Tainted(st))
	ac := corev1ac.Node(n.Name).WithResourceVersion(n.ResourceVersion).WithLabels(labels).WithAnnotations(annotations)
	return r.apply(ctx, ac, RemediationFieldOwner, "the remediation state")
}

// forgetRemediation removes the remediation label, annotations and the
// operator's unhealthy taint from a node the operator no longer repairs:
// remediation turned off, no policy, no longer a GPU node. A person's
// approval stays. A node that changed meanwhile is errStale, looked at
// again.
func (r *Reconciler) forgetRemediation(ctx context.Context, n *corev1.Node) error {
	if !hasRemediationMarks(n) {
		return nil
	}
	node, err := r.patchTaint(ctx, n, false, false)
	if node == nil {
		return err
	}
	// An empty apply drops the label and annotations the repair owns.
	_, err = r.apply(ctx, corev1ac.Node(n.Name).WithResourceVersion(node.ResourceVersion), RemediationFieldOwner, "the remediation's end")
	return err
}

// hasRemediationMarks reports whether a node carries anything of a repair
// the operator would remove.
func hasRemediationMarks(n *corev1.Node) bool {
	if _, ok := n.Labels[gpuv1.LabelRemediationState]; ok || slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint) {
		return true
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, gpuv1.RemediationAnnotationPrefix) && k != gpuv1.AnnotationRemediationApproved {
			return true
		}
	}
	return false
}

// deletePod deletes an operand pod, if it is still the one observed; its
// DaemonSet creates a new one.
func (r *Reconciler) deletePod(ctx context.Context, pod *operandpods.Pod) error {
	if pod == nil {
		return nil
	}
	if err := r.Client.Delete(ctx, pod.Ref(), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	return nil
}

func displayRemediation(s gpuv1.RemediationState) string {
	if s == "" {
		return "healthy"
	}
	return string(s)
}
