package maintenance

import (
	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
)

// mode is an allocation mode, as the node's label or the switch's
// annotations carry it.
type mode uint8

const (
	noMode mode = iota
	dpMode
	draMode
	noneMode
)

func (m mode) label() gpuv1.AllocationMode {
	return [...]gpuv1.AllocationMode{"", gpuv1.AllocationDevicePlugin, gpuv1.AllocationDRA, gpuv1.AllocationNone}[m]
}

func modeOf(l gpuv1.AllocationMode) mode {
	for m := noMode; m <= noneMode; m++ {
		if m.label() == l {
			return m
		}
	}
	panic("no allocation mode " + l)
}

// stepSwitch takes one step of the node's allocation mode switch, as the
// maintenance controller does: the plugin pods and slices it reads are the
// node controller's last word (judge).
func (n *node) stepSwitch(view *arbiter.Node, admitted arbiter.Operation, pool mode) []effect {
	st := n.sw.label()
	f := modeswitch.Facts{State: st, Since: n.since(arbiter.ModeSwitch), Now: now, Current: n.mode.label(), Desired: pool.label(),
		Target: n.swTarget.label(), Hold: n.swHold.label(), Admitted: admitted == arbiter.ModeSwitch, GPUPods: count(n.pods),
		// GPU pods are counted in every step, as the controller counts them
		// in the steps that read them.
		PluginPods: count(n.pluginReady), Slices: count(n.slices), Serving: n.pluginReady && n.mode == n.swTarget,
		Requeues: int(n.swRequeues)}
	step := modeswitch.Next(f, switchPolicy)
	if ok, _ := arbiter.Vet(view, arbiter.ModeSwitch, arbiter.ModeSwitchPhase(st, true), arbiter.ModeSwitchPhase(step.Next, true), admitted); !ok {
		step = modeswitch.Step{Next: st, Target: f.Target, Hold: f.Hold}
	}
	var effects []effect
	switch step.Action {
	case modeswitch.EvictGPUPods:
		effects = append(effects, evict)
	case modeswitch.DeleteSlices:
		effects = append(effects, func(n *node) { n.slices = n.pluginReady && n.mode == draMode })
	}
	// The taint goes on before the label that starts the switch, and
	// comes off before the one that ends it.
	if taint := modeswitch.Tainted(step.Next); taint != n.swTaint {
		effects = append(effects, func(n *node) { n.swTaint = taint })
	}
	requeues := n.swRequeues
	if step.Requeue {
		requeues++
	}
	if !(requeues > 0 && (modeswitch.InProgress(step.Next) || step.Next == gpuv1.ModeSwitchRequired)) {
		requeues = 0
	}
	next, target, hold := swOf(step.Next), modeOf(step.Target), modeOf(step.Hold)
	if next == n.sw && target == n.swTarget && hold == n.swHold && requeues == n.swRequeues {
		return effects
	}
	// The label and annotations, in one write.
	return append(effects, func(n *node) {
		if next != n.sw {
			n.expired[arbiter.ModeSwitch] = false
		}
		n.sw, n.swTarget, n.swHold, n.swRequeues = next, target, hold, requeues
		n.release(arbiter.ModeSwitch)
	})
}
