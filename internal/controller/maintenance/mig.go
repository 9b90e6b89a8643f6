package maintenance

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Annotations of a node's MIG reconfiguration.
const (
	// AnnotationMIGSince is when the node entered its reconfiguration state.
	AnnotationMIGSince = gpuv1.MIGReconfigureAnnotationPrefix + "since"
	// AnnotationMIGTarget is the configuration the reconfiguration applies.
	AnnotationMIGTarget = gpuv1.MIGReconfigureAnnotationPrefix + "target"
	// AnnotationMIGAttempt is the apply attempt under way, and
	// AnnotationMIGAttemptSince when it started.
	AnnotationMIGAttempt      = gpuv1.MIGReconfigureAnnotationPrefix + "attempt"
	AnnotationMIGAttemptSince = gpuv1.MIGReconfigureAnnotationPrefix + "attempt-since"
	// AnnotationMIGAttemptUnder is the node's boot and driver pod when
	// the attempt started (gating.DriverGeneration): the devices it
	// creates last as long as they do, even if the operator learns of
	// its success under another.
	AnnotationMIGAttemptUnder = gpuv1.MIGReconfigureAnnotationPrefix + "attempt-under"
	// AnnotationMIGGPUs is how many GPUs the node has, read from GFD while
	// none of them was partitioned: it makes the check of a new layout's
	// counts exact.
	AnnotationMIGGPUs = gpuv1.MIGReconfigureAnnotationPrefix + "gpus"
)

// migEvent is the reason of the events on a node's MIG reconfiguration.
const migEvent = "GPUMIGReconfigure"

// AnnotationMIGAttemptPod is the UID of the attempt's mig-manager pod,
// recorded once it runs with no other mig-manager pod left on the node:
// only its word counts for the attempt.
const AnnotationMIGAttemptPod = gpuv1.MIGReconfigureAnnotationPrefix + "attempt-pod"

// AnnotationMIGRequeues counts how many times the reconfiguration went back
// to the queue.
const AnnotationMIGRequeues = gpuv1.MIGReconfigureAnnotationPrefix + "requeues"

// reconfigurations is the MIG reconfiguration's machine.
type reconfigurations struct{}

func (reconfigurations) operation() arbiter.Operation { return arbiter.MIGReconfiguration }

// runs: migManager manages MIG, the node is not opted out of
// mig-manager, and no DRA driver with DynamicMIG manages its MIG devices:
// an apply under way when DynamicMIG is turned on finishes first (the
// node controller keeps mig-manager on the node until then, and the
// reconfiguration is let go at its validation, which the DRA driver's
// start would undo); any other is let go where it stands, as when
// migManager is turned off.
func (reconfigurations) runs(p *pass, n *corev1.Node) bool {
	st := migStateOf(n)
	return p.cp != nil && p.cp.Spec.MIGManager.Manages() && gating.IsGPUNode(n) &&
		deployed(n, state.MIGManager, st != "" && st != gpuv1.MIGReconfigureDone && n.Annotations[AnnotationMIGSince] != "") &&
		!(p.dynamicMIG && gating.AllocationModeOf(n) == gpuv1.AllocationDRA && st != gpuv1.MIGApply)
}

// position: a reconfigure-required node may start once Ready, its driver
// and toolkit ready, and its configuration one the operator can apply. A
// node whose MIG devices are gone applies its configuration again: what
// an upgrade's or a repair's validation waits for. It costs no place when
// it serves no GPUs (a new node: never served, nothing allocatable) or
// its devices are gone, and no GPU pod runs there, counted live only
// then.
func (reconfigurations) position(ctx context.Context, p *pass, n *corev1.Node, view *arbiter.Node) {
	st, desired := migStateOf(n), n.Labels[gpuv1.LabelMIGConfig]
	queued := nodeReady(n) && p.r.driverSettled(n) && p.configs.refusal(p.cp, n, desired) == ""
	lost := gating.MIGDevicesLost(n)
	view.Ops[arbiter.MIGReconfiguration] = arbiter.Position{Phase: arbiter.MIGPhase(st, queued), Since: sinceOf(n, AnnotationMIGSince)}
	// Whichever configuration comes next makes the devices a validation
	// waits for: the node controller keeps the device plugin off while
	// any is set and the devices are gone (gating.MIGGate).
	view.MIGRestore = lost && desired != ""
	if view.Ops[arbiter.MIGReconfiguration].Phase != arbiter.Queued || view.Held() {
		return
	}
	everServed, servingNow := n.Annotations[gpuv1.AnnotationServed] == gpuv1.LabelTrue, gating.ServesGPUs(n)
	if !arbiter.MIGStartsFree(everServed, servingNow, lost, 0) {
		return
	}
	pods, err := p.r.countPods(ctx, n.Name, nil, p.gpuPodEviction(ctx, n, arbiter.MIGReconfiguration).keep)
	if err != nil {
		// Unknown: it waits for a place, as a node with pods does.
		ctrl.LoggerFrom(ctx).Error(err, "counting the GPU pods of a node to reconfigure", "node", n.Name)
		return
	}
	view.MIGFree = arbiter.MIGStartsFree(everServed, servingNow, lost, pods)
}

func (reconfigurations) step(ctx context.Context, p *pass, n *corev1.Node, t turn) (stepped, error) {
	f, bind, err := p.r.migFacts(ctx, p, n)
	if err != nil {
		return stepped{node: n}, err
	}
	f.Admitted = t.admitted()
	step := migreconfig.Next(f, p.migPolicy())
	log, logs := verbose(ctx)
	if ok, why := t.vet(arbiter.MIGPhase(f.State, true), arbiter.MIGPhase(step.Next, true)); !ok {
		if logs {
			log.Info("MIG reconfiguration step held back", "node", n.Name, "state", f.State, "next", step.Next, "why", why)
		}
		step = migreconfig.Step{Next: f.State}
	}
	if logs {
		log.Info("MIG reconfiguration step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
	}
	node, next, err := p.r.takeMIG(ctx, p, n, f, step, bind)
	// A node waiting for its device plugin and GFD to settle polls too: no
	// node event says when they have.
	settling := f.InPlace == migreconfig.Unknown && next == gpuv1.MIGReconfigureRequired
	return stepped{node: node, busy: migreconfig.InProgress(next) || settling}, err
}

func (reconfigurations) forget(ctx context.Context, p *pass, n *corev1.Node) error {
	// What is applied stays known while the policy does: a node that
	// stops being a GPU node for a while (NFD restarting) keeps it. On a
	// node the DRA driver's DynamicMIG serves, its devices are the
	// driver's from now on (issue 52, finding 3).
	dynamic := p.cp != nil && p.dynamicMIG && gating.AllocationModeOf(n) == gpuv1.AllocationDRA
	return p.r.forgetMIG(ctx, n, p.cp == nil, dynamic)
}

// migJustDone reports whether a MIG reconfiguration ended on the node so
// recently that the kubelet still shows the old resource unallocatable
// (timers.KubeletResourceGrace): its GPUs look unhealthy until then, and
// no repair may start.
func (r *Reconciler) migJustDone(n *corev1.Node, now time.Time) bool {
	if migStateOf(n) != gpuv1.MIGReconfigureDone {
		return false
	}
	since, ok := stamp(n.Annotations[AnnotationMIGSince])
	return ok && now.Sub(since) < r.Timers.KubeletResourceGrace
}

// migFacts gathers what the reconfiguration's state machine needs about a
// node. Workload pods are listed live, and only while they are evicted.
// bind is the UID of a mig-manager pod to record as the attempt's: the
// attempt's first pod, running with no other left on the node.
func (r *Reconciler) migFacts(ctx context.Context, p *pass, n *corev1.Node) (f migreconfig.Facts, bind string, err error) {
	cp, o, configs := p.cp, p.obs, p.configs
	a := n.Annotations
	f = migreconfig.Facts{
		State:       migStateOf(n),
		Now:         p.now,
		Desired:     n.Labels[gpuv1.LabelMIGConfig],
		Applied:     a[gpuv1.AnnotationMIGApplied],
		Target:      a[AnnotationMIGTarget],
		ClientPods:  o.migClients[n.Name],
		ManagerPods: o.migManagerPods[n.Name],
		Lost:        gating.MIGDevicesLost(n),
	}
	f.Refused = configs.refusal(cp, n, f.Desired)
	f.Since, f.AttemptSince = f.Now, f.Now
	if t, ok := stamp(a[AnnotationMIGSince]); ok {
		f.Since = t
	}
	if t, ok := stamp(a[AnnotationMIGAttemptSince]); ok {
		f.AttemptSince = t
	}
	f.Attempt, _ = strconv.Atoi(a[AnnotationMIGAttempt])
	f.Requeues, _ = strconv.Atoi(a[AnnotationMIGRequeues])
	if f.State == gpuv1.MIGApply {
		// The attempt started with no mig-manager pod on the node: its
		// first pod is the attempt's, and only its word counts. A pod
		// that replaced it (a crash) has not been told of the attempt.
		pod, recorded := o.migManagers[n.Name], types.UID(a[AnnotationMIGAttemptPod])
		switch {
		case recorded == "" && pod != nil && f.ManagerPods == 1:
			bind = string(pod.UID)
			f.ConfigState = n.Labels[gpuv1.LabelMIGConfigState]
		case recorded != "" && pod != nil && pod.UID == recorded:
			f.ConfigState = n.Labels[gpuv1.LabelMIGConfigState]
		case recorded != "":
			f.AttemptPodGone = true
		}
	}
	switch f.State {
	case "", gpuv1.MIGReconfigureRequired, gpuv1.MIGReconfigureDone:
		if f.Applied == "" && f.Desired != "" && f.Refused == "" {
			f.InPlace = r.inPlace(cp, o, n, configs, f.Desired, f.Now)
		} else {
			f.InPlace = migreconfig.Differs
		}
	case gpuv1.MIGEviction:
		f.GPUPods, err = r.countPods(ctx, n.Name, nil, p.gpuPodEviction(ctx, n, arbiter.MIGReconfiguration).keep)
		return f, bind, err
	case gpuv1.MIGValidation:
		f.Advertised, f.Mismatch = r.advertised(cp, o, n, configs, f)
	}
	return f, bind, nil
}

// driverSettled reports whether mig-manager's prerequisites (the driver,
// the toolkit) are ready on the node: an apply started before would run
// its timeout while mig-manager waits for them, a slow driver build
// failing the node.
func (r *Reconciler) driverSettled(n *corev1.Node) bool {
	for _, p := range r.Graph.Prerequisites(state.MIGManager) {
		if v := gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(p))]); v != gpuv1.StateReady && v != gpuv1.StateDisabled {
			return false
		}
	}
	return true
}

func migStateOf(n *corev1.Node) gpuv1.MIGReconfigureState {
	return gpuv1.MIGReconfigureState(n.Labels[gpuv1.LabelMIGReconfigureState])
}

// migPolicy is the policy's MIG timeouts and the operator's timers; the
// apply timeout is never under the floor (timers.MIGApplyTimeoutFloor).
func (p *pass) migPolicy() migreconfig.Policy {
	spec, r := &p.cp.Spec.MIGManager, p.r
	return migreconfig.Policy{
		EvictionTimeout:   time.Duration(spec.EvictionTimeout()) * time.Second,
		ApplyTimeout:      max(time.Duration(spec.ApplyTimeout())*time.Second, r.Timers.MIGApplyTimeoutFloor),
		ValidationTimeout: time.Duration(spec.ValidationTimeout()) * time.Second,
		InPlaceWait:       r.Timers.MIGInPlaceWait,
		ClientsOffTimeout: r.Timers.MIGClientsOffTimeout,
		RetryBackoff:      r.Timers.MIGRetryBackoff,
	}
}
