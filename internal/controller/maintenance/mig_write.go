package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
)

// MIGFieldOwner manages the reconfiguration's label and annotations,
// apart from the upgrade's and the repair's: forgetting one never drops
// the others.
const MIGFieldOwner = "gpu-operator-mig"

// takeMIG performs a step's action and records the node's next state. A
// failed action leaves the state as it is, to be retried.
// bind is the UID of the attempt's mig-manager pod to record, if any.
func (r *Reconciler) takeMIG(ctx context.Context, p *pass, n *corev1.Node, f migreconfig.Facts, step migreconfig.Step,
	bind string) (*corev1.Node, gpuv1.MIGReconfigureState, error) {
	if step.Action == migreconfig.EvictGPUPods {
		err := r.evict(ctx, n, migEvent, p.gpuPodEviction(ctx, n, arbiter.MIGReconfiguration))
		if err != nil {
			return n, f.State, fmt.Errorf("node %s, %s: %w", n.Name, step.Action, err)
		}
	}
	// The taint goes on before the label that starts the eviction and
	// comes off before the label that ends the reconfiguration; the
	// pending mark goes with it, before the label that lets mig-manager
	// run: a restart between two writes takes the same decision again.
	mark := keepConfigState
	if step.Action == migreconfig.StartAttempt {
		mark = markPending
	}
	node, err := r.patchMIG(ctx, n, migreconfig.Tainted(step.Next), mark)
	if node == nil {
		return n, f.State, err
	}
	// What is applied is not refused, unless its devices are gone and
	// it cannot be applied again.
	refused := f.Refused
	if f.Desired == f.Applied && !f.Lost {
		refused = ""
	}
	if step.Next == f.State && node == n && step.Action != migreconfig.StartAttempt && !step.Adopt && bind == "" &&
		refused == n.Annotations[gpuv1.AnnotationMIGRefused] {
		return n, f.State, nil
	}
	written, err := r.writeMIG(ctx, node, f, step, refused, bind, p.configs.partitions, p.holdOf(node))
	if err != nil {
		return node, f.State, err
	}
	if refused != "" && refused != n.Annotations[gpuv1.AnnotationMIGRefused] {
		r.Recorder.Eventf(n, nil, corev1.EventTypeWarning, migEvent, "Refuse", "MIG configuration %q is not applied: %s", f.Desired, refused)
	}
	if step.Adopt {
		r.Recorder.Eventf(n, nil, corev1.EventTypeNormal, migEvent, "Adopt", "%s", step.Reason)
	}
	if step.Next != f.State || step.Action == migreconfig.StartAttempt {
		kind := corev1.EventTypeNormal
		if step.Next == gpuv1.MIGReconfigureFailed || step.Retry || step.Requeue {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(n, nil, kind, migEvent, "Reconfigure", "%s -> %s: %s", displayMIG(f.State), displayMIG(step.Next), step.Reason)
	}
	return written, step.Next, nil
}

// configStateMark is what patchMIG does to mig-manager's
// nvidia.com/mig.config.state.
type configStateMark int

const (
	keepConfigState configStateMark = iota
	// markPending: a new attempt starts, and only mig-manager's word
	// after it counts.
	markPending
	// removeConfigState: the operator is uninstalled, and leaves no
	// label of its reconfigurations.
	removeConfigState
)

// patchMIG adds or removes the operator's reconfiguring taint, and marks
// mig-manager's nvidia.com/mig.config.state for a new attempt, in
// one merge patch on the node's resourceVersion: taints are an atomic
// list that server-side apply would own whole, and the state label is
// mig-manager's, which it overwrites, not a field the operator keeps. It
// returns the node to write the label on: n itself when nothing changed,
// the patched node otherwise, nil with errStale when the node changed
// meanwhile, nil with an error when the patch failed.
func (r *Reconciler) patchMIG(ctx context.Context, n *corev1.Node, taint bool, mark configStateMark) (*corev1.Node, error) {
	has := slices.ContainsFunc(n.Spec.Taints, gating.IsOwnMIGTaint)
	_, hasState := n.Labels[gpuv1.LabelMIGConfigState]
	if has == taint && (mark == keepConfigState || (mark == removeConfigState && !hasState)) {
		return n, nil
	}
	return r.patchNode(ctx, n, MIGFieldOwner, "the MIG taint", func(patched *corev1.Node) {
		setOwnTaint(patched, gating.MIGTaint, gating.IsOwnMIGTaint, taint)
		switch mark {
		case markPending:
			patched.Labels[gpuv1.LabelMIGConfigState] = gpuv1.MIGConfigPending
		case removeConfigState:
			delete(patched.Labels, gpuv1.LabelMIGConfigState)
		}
	})
}

// writeMIG applies the node's reconfiguration label and annotations in
// one request on the version of the node the step was decided from (or
// its taint patched): a decision taken on a stale cache fails with a
// conflict (errStale) and is taken again. partitions says which
// configurations create MIG devices, whose driver is recorded.
func (r *Reconciler) writeMIG(ctx context.Context, n *corev1.Node, f migreconfig.Facts, step migreconfig.Step, refused, bind string,
	partitions func(config string) bool, h hold) (*corev1.Node, error) {
	st := step.Next
	a := map[string]string{}
	set := func(key, value string) {
		if value != "" {
			a[key] = value
		}
	}
	keep := func(key string) { set(key, n.Annotations[key]) }
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	since := f.Since
	if st != f.State {
		since = f.Now
	}
	set(AnnotationMIGSince, stamp(since))
	set(gpuv1.AnnotationMIGRefused, refused)
	keep(gpuv1.AnnotationMIGApplied)
	keep(gpuv1.AnnotationMIGAppliedUnder)
	// record records a configuration as applied, with the driver its
	// devices, if it creates any, were created under.
	record := func(config, under string) {
		a[gpuv1.AnnotationMIGApplied] = config
		delete(a, gpuv1.AnnotationMIGAppliedUnder)
		if partitions(config) {
			set(gpuv1.AnnotationMIGAppliedUnder, under)
		}
	}
	if step.Adopt {
		record(f.Desired, gating.DriverGeneration(n)) // the devices are advertised now
	}
	keep(AnnotationMIGGPUs)
	if c := gpuCount(n); c > 0 {
		set(AnnotationMIGGPUs, strconv.Itoa(c))
	}
	if migreconfig.Tainted(st) {
		keep(AnnotationMIGTarget)
		set(AnnotationMIGTarget, step.Target)
	}
	// The requeues count until the reconfiguration ends.
	requeues := f.Requeues
	if step.Requeue {
		requeues++
	}
	if requeues > 0 && (migreconfig.InProgress(st) || st == gpuv1.MIGReconfigureRequired) {
		set(AnnotationMIGRequeues, strconv.Itoa(requeues))
	}
	switch {
	case step.Action == migreconfig.StartAttempt:
		set(AnnotationMIGAttempt, strconv.Itoa(step.Attempt))
		set(AnnotationMIGAttemptSince, stamp(f.Now))
		set(AnnotationMIGAttemptUnder, gating.DriverGeneration(n))
	case step.Retry:
		// Back at clients-off, the attempt that ended is the count the
		// next one goes on from.
		set(AnnotationMIGAttempt, strconv.Itoa(step.Attempt))
	case st == gpuv1.MIGClientsOff && f.State == gpuv1.MIGClientsOff:
		keep(AnnotationMIGAttempt)
	case st == gpuv1.MIGApply:
		keep(AnnotationMIGAttempt)
		keep(AnnotationMIGAttemptSince)
		keep(AnnotationMIGAttemptUnder)
		keep(AnnotationMIGAttemptPod)
		set(AnnotationMIGAttemptPod, bind)
	case st == gpuv1.MIGValidation && f.State == gpuv1.MIGApply:
		// A reboot or a new driver between the attempt's start and now
		// shows as a loss, and the configuration is applied again.
		under := n.Annotations[AnnotationMIGAttemptUnder]
		if under == "" {
			under = gating.DriverGeneration(n)
		}
		record(step.Target, under)
	case st == gpuv1.MIGReconfigureFailed && f.State != st:
		set(gpuv1.AnnotationMIGReason, step.Reason)
	case st == gpuv1.MIGReconfigureFailed:
		keep(gpuv1.AnnotationMIGReason)
	}
	labels := map[string]string{}
	if st != "" {
		labels[gpuv1.LabelMIGReconfigureState] = string(st)
	}
	h.mark(a, migreconfig.Tainted(st))
	ac := corev1ac.Node(n.Name).WithResourceVersion(n.ResourceVersion).WithLabels(labels).WithAnnotations(a)
	return r.apply(ctx, ac, MIGFieldOwner, "the MIG reconfiguration state")
}

// forgetMIG removes the reconfiguration's label, annotations and taint
// from a node the operator no longer reconfigures: migManager turned off,
// no policy, no longer a GPU node, or served by the DRA driver's
// DynamicMIG. What is applied stays known while the policy does (all is
// set once it is deleted); under DynamicMIG (dynamic) its devices are
// marked gone (gpuv1.MIGAppliedUnderDynamicMIG), so that a node that
// leaves it has its configuration applied again before a plugin serves
// it, as after a reboot. A node that changed meanwhile is errStale,
// looked at again.
func (r *Reconciler) forgetMIG(ctx context.Context, n *corev1.Node, all, dynamic bool) error {
	applied := n.Annotations[gpuv1.AnnotationMIGApplied]
	under := n.Annotations[gpuv1.AnnotationMIGAppliedUnder]
	if dynamic && applied != "" {
		under = gpuv1.MIGAppliedUnderDynamicMIG
	}
	if !hasMIGMarks(n, all) && under == n.Annotations[gpuv1.AnnotationMIGAppliedUnder] {
		return nil
	}
	mark := keepConfigState
	if all {
		mark = removeConfigState
	}
	node, err := r.patchMIG(ctx, n, false, mark)
	if node == nil {
		return err
	}
	// An apply of what stays drops the rest the reconfiguration owns.
	ac := corev1ac.Node(n.Name).WithResourceVersion(node.ResourceVersion)
	if applied != "" && !all {
		kept := map[string]string{gpuv1.AnnotationMIGApplied: applied}
		if under != "" {
			kept[gpuv1.AnnotationMIGAppliedUnder] = under
		}
		ac.WithAnnotations(kept)
	}
	_, err = r.apply(ctx, ac, MIGFieldOwner, "the MIG reconfiguration's end")
	return err
}

// hasMIGMarks reports whether a node carries anything of a
// reconfiguration the operator would remove; the record of what is
// applied, and mig-manager's state label on a node the operator
// reconfigured, only when all goes.
func hasMIGMarks(n *corev1.Node, all bool) bool {
	if _, ok := n.Labels[gpuv1.LabelMIGReconfigureState]; ok || slices.ContainsFunc(n.Spec.Taints, gating.IsOwnMIGTaint) {
		return true
	}
	if _, ok := n.Labels[gpuv1.LabelMIGConfigState]; ok && all && n.Annotations[gpuv1.AnnotationMIGApplied] != "" {
		return true // a node the operator reconfigured
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, gpuv1.MIGReconfigureAnnotationPrefix) && (all || !appliedRecord(k)) {
			return true
		}
	}
	return false
}

// appliedRecord reports whether an annotation is the record of what is
// applied, which stays while the policy does.
func appliedRecord(key string) bool {
	return key == gpuv1.AnnotationMIGApplied || key == gpuv1.AnnotationMIGAppliedUnder
}

func displayMIG(s gpuv1.MIGReconfigureState) string {
	if s == "" {
		return "configured"
	}
	return string(s)
}
