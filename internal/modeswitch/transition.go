package modeswitch

import (
	"fmt"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// MaxRequeues is how many times a switch goes back to the queue, its GPU
// pods not gone in time, before it fails: a node whose pods never leave
// must not cycle through the queue unseen.
const MaxRequeues = 3

// Action is what the controller does for a node before writing its next
// state.
type Action int

// Actions of the state machine.
const (
	None Action = iota
	// EvictGPUPods evicts the node's GPU pods through the Eviction API,
	// PodDisruptionBudgets honoured.
	EvictGPUPods
	// DeleteSlices deletes the ResourceSlices the DRA driver's plugin
	// left on the node once its pod is gone: the kubelet deletes them
	// too, but only after a delay.
	DeleteSlices
)

func (a Action) String() string {
	return [...]string{"none", "evict GPU pods", "delete the node's ResourceSlices"}[a]
}

// Policy bounds each step that acts or waits.
type Policy struct {
	// EvictionTimeout bounds the eviction of the GPU pods: the pool's
	// driver upgrade's podDeletion timeout.
	EvictionTimeout time.Duration
	// PluginsOffTimeout bounds how long the plugin of the old mode and
	// its ResourceSlices may take to leave.
	PluginsOffTimeout time.Duration
	// ValidationTimeout bounds how long the plugin of the new mode may
	// take to serve the node's GPUs.
	ValidationTimeout time.Duration
}

// Facts is what is known about one node.
type Facts struct {
	State gpuv1.ModeSwitchState // "" when the node has no label
	// Since is when the node entered State.
	Since time.Time
	Now   time.Time
	// Current is the node's allocation mode as its label says; Desired
	// its pool's; Target the one this switch moves it to, "" before it
	// starts; Hold the mode the switch holds the node's label at, ""
	// when it holds none (gpuv1.AnnotationModeSwitchHold).
	Current, Desired, Target, Hold gpuv1.AllocationMode
	// Refused says why Desired cannot run on the node (the API server
	// serves no ResourceSlices, CDI is off); "" when it can.
	Refused string
	// Admitted is true when the arbiter lets this node start.
	Admitted bool
	// GPUPods counts the pods still using the node's GPUs: nvidia.com/gpu
	// and MIG resources, or ResourceClaims of NVIDIA's DRA driver.
	GPUPods int
	// PluginPods counts the device plugin, MPS daemon and DRA driver
	// plugin pods on the node, terminating ones included.
	PluginPods int
	// Slices counts the node's ResourceSlices of NVIDIA's DRA driver.
	Slices int
	// Serving is true when the plugin of Target serves the node's GPUs:
	// its state is ready there, or disabled by a person's deploy label.
	Serving bool
	// Requeues counts how many times the switch went back to the queue.
	Requeues int
}

// Step is a transition: the next state, the action that gets there, and
// why.
type Step struct {
	Next   gpuv1.ModeSwitchState
	Action Action
	Reason string
	// Target and Hold are the switch's target and the mode it holds the
	// node's label at after the step ("" for none).
	Target, Hold gpuv1.AllocationMode
	// Requeue says the step sends the node back to the queue.
	Requeue bool
}

// Tainted reports whether a node in the state carries the switch's taint:
// from the eviction of its GPU pods until the plugin of its new mode
// serves, or its failure is dealt with.
func Tainted(s gpuv1.ModeSwitchState) bool {
	return InProgress(s) || s == gpuv1.ModeSwitchFailed
}

// InProgress reports whether a node in the state is being switched: each
// such step has a timeout and is looked at again until it ends.
func InProgress(s gpuv1.ModeSwitchState) bool {
	switch s {
	case gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff, gpuv1.ModeSwitchPluginOn:
		return true
	}
	return false
}

// Next is the transition table: one step per call.
func Next(f Facts, p Policy) Step {
	if f.Target == "" && Tainted(f.State) {
		f.Target = reachable(f) // lost with a person's edit of the annotations
	}
	if held, ok := holdOf(f.State, f.Target); ok && f.Hold != held {
		// A person edited the hold: the label may have let a plugin
		// back, and GPU pods with it.
		return Step{Next: gpuv1.ModeSwitchEviction, Target: f.Target, Hold: f.Hold,
			Reason: fmt.Sprintf("the switch's hold of the node's allocation mode is %q, not %q: evicting the GPU pods again", f.Hold, held)}
	}
	stay := Step{Next: f.State, Target: f.Target, Hold: f.Hold}
	elapsed := f.Now.Sub(f.Since)
	switch f.State {
	case "", gpuv1.ModeSwitchDone:
		switch {
		case f.Hold != "":
			return Step{Next: gpuv1.ModeSwitchRequired, Target: f.Target, Hold: f.Hold,
				Reason: fmt.Sprintf("the node's allocation mode is held at %s by a switch whose state is gone: it starts over", f.Hold)}
		case f.Current != f.Desired && f.Refused == "":
			return Step{Next: gpuv1.ModeSwitchRequired, Reason: fmt.Sprintf("the pool's allocation mode is %s, the node serves in %s", f.Desired, f.Current)}
		}
		return stay
	case gpuv1.ModeSwitchRequired:
		switch {
		case settled(f) && f.Current == f.Desired:
			return Step{Next: "", Reason: fmt.Sprintf("the node is in its pool's allocation mode %s already", f.Desired)}
		case f.Hold == "" && f.Refused != "":
			return Step{Next: "", Reason: fmt.Sprintf("allocation mode %s cannot run: %s", f.Desired, f.Refused)}
		case !f.Admitted:
			return stay
		}
		target := reachable(f)
		return Step{Next: gpuv1.ModeSwitchEviction, Target: target, Hold: f.Hold,
			Reason: fmt.Sprintf("switching to allocation mode %s: tainted, evicting the GPU pods", target)}
	case gpuv1.ModeSwitchEviction:
		switch {
		case settled(f) && reachable(f) == f.Current:
			return Step{Next: "", Reason: fmt.Sprintf("%s, the node's: untainted, nothing changed", moved(f))}
		case f.GPUPods == 0:
			return Step{Next: gpuv1.ModeSwitchPluginsOff, Target: f.Target, Hold: gpuv1.AllocationNone,
				Reason: "no GPU pod left: allocation mode none, the plugin leaves the node and its ResourceSlices go"}
		case elapsed >= p.EvictionTimeout:
			// The GPUs are untouched: the node serves on, untainted, and
			// waits for its turn again, behind the nodes waiting already.
			return requeue(f, fmt.Sprintf("%d GPU pod(s) left after %s (PodDisruptionBudgets?)", f.GPUPods, p.EvictionTimeout))
		}
		stay.Action = EvictGPUPods
		return stay
	case gpuv1.ModeSwitchPluginsOff:
		switch {
		case cleared(f):
			return pluginOn(f, "no plugin left on the node")
		case elapsed >= p.PluginsOffTimeout:
			return Step{Next: gpuv1.ModeSwitchFailed, Target: f.Target, Hold: f.Hold,
				Reason: fmt.Sprintf("%d plugin pod(s), %d ResourceSlice(s) and %d GPU pod(s) still on the node after %s",
					f.PluginPods, f.Slices, f.GPUPods, p.PluginsOffTimeout)}
		case f.GPUPods > 0:
			// Scheduled since the eviction (a pod tolerating the taint):
			// the old plugin may still hand it a GPU.
			stay.Action = EvictGPUPods
		case f.PluginPods == 0:
			stay.Action = DeleteSlices
		}
		return stay
	case gpuv1.ModeSwitchPluginOn:
		switch {
		case reachable(f) != f.Target:
			return retarget(f, fmt.Sprintf("%s: the %s plugin leaves again, once the GPU pods are evicted", moved(f), f.Target))
		case f.Serving:
			return Step{Next: gpuv1.ModeSwitchDone, Reason: fmt.Sprintf("the node serves its GPUs in allocation mode %s: untainted", f.Target)}
		case elapsed >= p.ValidationTimeout:
			return Step{Next: gpuv1.ModeSwitchFailed, Target: f.Target, Hold: f.Hold,
				Reason: fmt.Sprintf("the plugin of allocation mode %s did not serve the node's GPUs within %s", f.Target, p.ValidationTimeout)}
		}
		return stay
	case gpuv1.ModeSwitchFailed:
		// The node holds its place in the budget, tainted: a new mode
		// starts over without waiting for another place.
		switch {
		case f.Hold == "" && reachable(f) == f.Current:
			return Step{Next: "", Reason: fmt.Sprintf("%s, the node's: untainted, nothing changed", moved(f))}
		case f.Hold != "" && reachable(f) != f.Target:
			return retarget(f, fmt.Sprintf("%s: starting over, the %s plugin leaves once the GPU pods are evicted", moved(f), f.Target))
		case f.Hold != "" && f.Hold == f.Target && f.Serving:
			return Step{Next: gpuv1.ModeSwitchDone, Reason: fmt.Sprintf("the node serves its GPUs in allocation mode %s after all: untainted", f.Target)}
		case f.Hold == gpuv1.AllocationNone && cleared(f):
			return pluginOn(f, "the plugin and its ResourceSlices left after all")
		}
		return stay
	}
	// A value no step writes (a person's typo): from the beginning, the
	// mode held as it is.
	return Step{Next: "", Target: f.Target, Hold: f.Hold, Reason: fmt.Sprintf("unknown state %q", f.State)}
}

// settled reports whether the switch holds the node's label at no mode
// but the one it has, before it acts (queued, or evicting): taking the
// hold back changes nothing.
func settled(f Facts) bool {
	return f.Hold == "" || (f.Hold == f.Current && f.Hold != gpuv1.AllocationNone)
}

// cleared reports whether nothing of the old mode is left on a node held
// at none: the label says none, so no DaemonSet starts a plugin; no plugin
// pod, ResourceSlice or GPU pod is there.
func cleared(f Facts) bool {
	return f.Current == gpuv1.AllocationNone && f.PluginPods == 0 && f.Slices == 0 && f.GPUPods == 0
}

// pluginOn moves a cleared node to its new mode.
func pluginOn(f Facts, why string) Step {
	target := reachable(f)
	return Step{Next: gpuv1.ModeSwitchPluginOn, Target: target, Hold: target,
		Reason: fmt.Sprintf("%s: allocation mode %s, its plugin starts", why, target)}
}

// reachable is the mode a switch that takes, or took, the node's plugin
// off moves it to: its pool's, or, where that cannot run, the device
// plugin's, which needs nothing the cluster may lack. A node held by a
// switch is not left without a plugin.
func reachable(f Facts) gpuv1.AllocationMode {
	if f.Refused != "" {
		return gpuv1.AllocationDevicePlugin
	}
	return f.Desired
}

// moved says why a switch under way changes its target.
func moved(f Facts) string {
	if f.Refused != "" {
		return fmt.Sprintf("allocation mode %s cannot run (%s): back to %s", f.Desired, f.Refused, reachable(f))
	}
	return fmt.Sprintf("the pool's allocation mode is %s now", f.Desired)
}

// holdOf is the hold a switch in the state keeps on the node's label:
// none while the plugins leave, the target while its plugin starts.
func holdOf(s gpuv1.ModeSwitchState, target gpuv1.AllocationMode) (gpuv1.AllocationMode, bool) {
	switch s {
	case gpuv1.ModeSwitchPluginsOff:
		return gpuv1.AllocationNone, true
	case gpuv1.ModeSwitchPluginOn:
		return target, true
	}
	return "", false
}

// retarget moves a switch that has changed the node's mode to a new
// target: through the eviction again, since a pod that tolerates the
// taint may have been scheduled onto the plugin that is to leave.
func retarget(f Facts, why string) Step {
	return Step{Next: gpuv1.ModeSwitchEviction, Target: reachable(f), Hold: f.Hold, Reason: why}
}

// requeue sends the node back to the queue, untainted, its GPUs untouched,
// or, after MaxRequeues, fails it: a node whose pods never leave is for a
// person to look at, not for the queue to turn for ever.
func requeue(f Facts, why string) Step {
	if f.Requeues+1 >= MaxRequeues {
		return Step{Next: gpuv1.ModeSwitchFailed, Target: f.Target, Hold: f.Hold,
			Reason: fmt.Sprintf("%s, and the node went back to the queue %d times already: it is left to a person", why, f.Requeues)}
	}
	return Step{Next: gpuv1.ModeSwitchRequired, Hold: f.Hold, Requeue: true,
		Reason: fmt.Sprintf("%s: untainted, back in the queue (%d of %d)", why, f.Requeues+1, MaxRequeues)}
}
