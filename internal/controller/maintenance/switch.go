package maintenance

import (
	"cmp"
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Annotations of a node's allocation mode switch, beside
// gpuv1.AnnotationModeSwitchHold and gpuv1.AnnotationModeSwitchReason.
const (
	// AnnotationSwitchSince is when the node entered its switch state.
	AnnotationSwitchSince = gpuv1.ModeSwitchAnnotationPrefix + "since"
	// AnnotationSwitchTarget is the allocation mode the switch moves the
	// node to.
	AnnotationSwitchTarget = gpuv1.ModeSwitchAnnotationPrefix + "target"
	// AnnotationSwitchRequeues counts how many times the switch went back
	// to the queue.
	AnnotationSwitchRequeues = gpuv1.ModeSwitchAnnotationPrefix + "requeues"
)

// switchEvent is the reason of the events on a node's switch.
const switchEvent = "GPUAllocationModeSwitch"

// switches is the allocation mode switch's machine.
type switches struct{}

func (switches) operation() arbiter.Operation { return arbiter.ModeSwitch }

// runs: a policy, and a GPU node.
func (switches) runs(p *pass, n *corev1.Node) bool { return p.cp != nil && gating.IsGPUNode(n) }

// position: a switch-required node may start once Ready and its driver
// and toolkit ready, which both plugins start after.
func (switches) position(_ context.Context, p *pass, n *corev1.Node, view *arbiter.Node) {
	queued := nodeReady(n) && p.r.driverSettled(n)
	view.Ops[arbiter.ModeSwitch] = arbiter.Position{Phase: arbiter.ModeSwitchPhase(switchStateOf(n), queued),
		Since: sinceOf(n, AnnotationSwitchSince)}
}

func (switches) step(ctx context.Context, p *pass, n *corev1.Node, t turn) (stepped, error) {
	f, err := p.r.switchFacts(ctx, p, n)
	if err != nil {
		return stepped{node: n}, err
	}
	f.Admitted = t.admitted()
	// Its timeouts read the node's one clock; the state is written with
	// its own time.
	clocked := f
	clocked.Since = t.clock(f.Since, f.Now)
	pol := p.switchPolicy(n)
	step := modeswitch.Next(clocked, pol)
	log, logs := verbose(ctx)
	if ok, why := t.vet(arbiter.ModeSwitchPhase(f.State, true), arbiter.ModeSwitchPhase(step.Next, true)); !ok {
		if logs {
			log.Info("allocation mode switch step held back", "node", n.Name, "state", f.State, "next", step.Next, "why", why)
		}
		step = modeswitch.Step{Next: f.State, Target: f.Target, Hold: f.Hold}
	}
	if logs {
		log.Info("allocation mode switch step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
	}
	keep := t.keepForward(&f.Since, f.Now, pol.ValidationTimeout, step.Next == f.State)
	node, next, err := p.r.takeSwitch(ctx, p, n, f, step, keep)
	return stepped{node: node, busy: modeswitch.InProgress(next)}, err
}

func (switches) forget(ctx context.Context, p *pass, n *corev1.Node) error {
	return p.r.forgetSwitch(ctx, n)
}

// switchFacts gathers what the switch's state machine needs about a node.
// Workload pods are listed live, and the node's ResourceSlices read, only
// in the steps that wait for them to go: the eviction (pods alone), the
// plugins leaving, and a failure that may resume once they have.
func (r *Reconciler) switchFacts(ctx context.Context, p *pass, n *corev1.Node) (modeswitch.Facts, error) {
	a := n.Annotations
	f := modeswitch.Facts{
		State:      switchStateOf(n),
		Now:        p.now,
		Current:    gating.AllocationModeOf(n),
		Desired:    p.obs.pools.Assign(n.Name, n.Labels).Mode,
		Target:     gpuv1.AllocationMode(a[AnnotationSwitchTarget]),
		Hold:       gpuv1.AllocationMode(a[gpuv1.AnnotationModeSwitchHold]),
		PluginPods: p.obs.plugins[n.Name],
	}
	if f.Desired == "" {
		// Held by no driver pool (two NVIDIADrivers select it, or none):
		// it keeps the mode it serves in, as the node controller keeps it,
		// or goes on to the one a switch under way moves it to.
		f.Desired = cmp.Or(f.Target, f.Current)
		if f.Desired == gpuv1.AllocationNone {
			f.Desired = gpuv1.AllocationDevicePlugin
		}
	}
	if f.Desired == gpuv1.AllocationDRA {
		f.Refused = gating.DRARefusal(p.cp, r.Slices != nil)
	}
	f.Since = f.Now
	if t, ok := stamp(a[AnnotationSwitchSince]); ok {
		f.Since = t
	}
	f.Requeues, _ = strconv.Atoi(a[AnnotationSwitchRequeues])
	f.Serving = f.Current == f.Target && servingIn(n, f.Target)
	switch f.State {
	case gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff, gpuv1.ModeSwitchFailed:
		var err error
		if f.GPUPods, err = r.countPods(ctx, n.Name, nil, p.gpuPodEviction(ctx, n, arbiter.ModeSwitch).keep); err != nil {
			return f, err
		}
	}
	if (f.State == gpuv1.ModeSwitchPluginsOff || f.State == gpuv1.ModeSwitchFailed) && r.Slices != nil {
		slices, err := r.Slices.OnNode(n.Name)
		if err != nil {
			return f, err
		}
		f.Slices = slices.Slices
	}
	return f, nil
}

// servingIn reports whether the plugin of the mode serves the node's GPUs:
// its state is ready there, or disabled (turned off in the policy, or by a
// person's deploy label): nothing is to wait for.
func servingIn(n *corev1.Node, mode gpuv1.AllocationMode) bool {
	plugin := state.DevicePlugin
	switch mode {
	case gpuv1.AllocationDRA:
		plugin = state.DRADriver
	case gpuv1.AllocationDevicePlugin:
	default:
		return false
	}
	v := gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(plugin))])
	return v == gpuv1.StateReady || v == gpuv1.StateDisabled
}

func switchStateOf(n *corev1.Node) gpuv1.ModeSwitchState {
	return gpuv1.ModeSwitchState(n.Labels[gpuv1.LabelModeSwitchState])
}

// switchPolicy is the switch's timeouts: the eviction's is the node's
// pool's driver upgrade's podDeletion timeout, where it sets one.
func (p *pass) switchPolicy(n *corev1.Node) modeswitch.Policy {
	eviction := p.r.Timers.ModeSwitchTimeout
	if s := p.upgradeSpec(n).PodDeletion.TimeoutSeconds; s != nil && *s > 0 {
		eviction = time.Duration(*s) * time.Second
	}
	return modeswitch.Policy{EvictionTimeout: eviction, PluginsOffTimeout: p.r.Timers.ModeSwitchTimeout,
		ValidationTimeout: p.r.Timers.DriverValidationTimeout}
}
