package migreconfig

import (
	"fmt"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// InPlaceWait bounds how long a serving node with no configuration known
// applied waits for its device plugin and GFD to settle, to learn whether
// it has the requested layout already, before it is reconfigured anyway.
const InPlaceWait = 2 * time.Minute

// ClientsOffTimeout bounds how long the device plugin, GFD and
// dcgm-exporter may take to leave the node.
const ClientsOffTimeout = 10 * time.Minute

// MaxAttempts is how many mig-manager pods try to apply a configuration
// before the node's reconfiguration fails.
const MaxAttempts = 3

// retryBackoff is how long after its start a failed attempt is retried:
// 15 s after the first, doubling after each, so that a configuration
// that cannot apply (a profile the GPU does not have) does not spin.
func retryBackoff(attempt int) time.Duration { return 15 * time.Second << (attempt - 1) }

// Action is what the controller does for a node before writing its next
// state.
type Action int

// Actions of the state machine.
const (
	None Action = iota
	EvictGPUPods
	// StartAttempt marks nvidia.com/mig.config.state pending and deletes
	// any mig-manager pod on the node: the one its DaemonSet starts next
	// applies the node's configuration.
	StartAttempt
)

func (a Action) String() string {
	return [...]string{"none", "evict GPU pods", "start an apply attempt"}[a]
}

// Advertised is what the node's device plugin advertises, judged against
// the configuration applied.
type Advertised int

// Advertised values.
const (
	// Unknown: the device plugin has not settled since the apply.
	Unknown Advertised = iota
	Matches
	Differs
)

// Policy is the part of spec.migManager transitions read.
type Policy struct {
	EvictionTimeout, ApplyTimeout, ValidationTimeout time.Duration
}

// Facts is what is known about one node.
type Facts struct {
	State gpuv1.MIGReconfigureState // "" when the node has no label
	// Since is when the node entered State.
	Since time.Time
	Now   time.Time
	// Desired is the node's nvidia.com/mig.config; Applied the
	// configuration last applied, "" when none is known; Target the one
	// this reconfiguration applies.
	Desired, Applied, Target string
	// Refused says why Desired cannot be applied (no such configuration,
	// no readable file, a layout the MIG strategy cannot advertise); ""
	// when it can.
	Refused string
	// Lost is true when the node rebooted or loaded another driver since
	// the MIG devices of Applied were created: MIG mode survives that,
	// the devices do not, and Applied is applied again.
	Lost bool
	// Admitted is true when the budget lets this node start.
	Admitted bool
	// GPUPods counts the pods still using GPUs on the node.
	GPUPods int
	// ClientPods counts the device plugin, GFD and dcgm-exporter pods
	// still on the node.
	ClientPods int
	// ConfigState is mig-manager's nvidia.com/mig.config.state, as the
	// attempt's own pod left it: "" while no mig-manager pod started
	// after the attempt runs (a pod of an attempt before, still
	// terminating, may write it).
	ConfigState string
	// Attempt is the number of the apply attempt under way (1 for the
	// first), and AttemptSince when it started.
	Attempt      int
	AttemptSince time.Time
	// InPlace says, where no configuration is known applied, whether the
	// node's settled device plugin advertises exactly what Desired makes
	// (whole GPUs, where MIG is disabled already): Matches takes it as
	// applied, with nothing evicted or restarted; Unknown waits, up to
	// InPlaceWait, for the plugin and GFD of a serving node to settle.
	InPlace Advertised
	// Advertised is what the device plugin advertises since the apply;
	// Mismatch says how it differs.
	Advertised Advertised
	Mismatch   string
}

// Step is a transition: the next state, the action that gets there, and
// why.
type Step struct {
	Next   gpuv1.MIGReconfigureState
	Action Action
	Reason string
	// Target is the configuration the node is to get, when the step
	// starts or restarts an apply.
	Target string
	// Adopt records Desired as applied: the node has it already.
	Adopt bool
}

// Tainted reports whether a node in the state carries the operator's
// reconfiguring taint: from the eviction of its GPU pods until its new
// devices are advertised, or its failure is dealt with.
func Tainted(s gpuv1.MIGReconfigureState) bool {
	return InProgress(s) || s == gpuv1.MIGReconfigureFailed
}

// InProgress reports whether a node in the state is being reconfigured:
// each such step has a timeout and is looked at again until it ends.
func InProgress(s gpuv1.MIGReconfigureState) bool {
	switch s {
	case gpuv1.MIGEviction, gpuv1.MIGClientsOff, gpuv1.MIGApply, gpuv1.MIGValidation:
		return true
	}
	return false
}

// Next is the transition table: one step per call.
func Next(f Facts, p Policy) Step {
	stay := Step{Next: f.State}
	elapsed := f.Now.Sub(f.Since)
	changed := f.Desired != "" && f.Desired != f.Applied
	switch f.State {
	case "", gpuv1.MIGReconfigureDone:
		if f.Lost && !changed && f.Desired != "" && f.Refused == "" {
			return Step{Next: gpuv1.MIGReconfigureRequired, Reason: fmt.Sprintf("the node rebooted or loaded a new driver: "+
				"the MIG devices of %q are gone, it is applied again", f.Applied)}
		}
		if changed && f.Refused == "" && f.Applied == "" && f.InPlace == Matches {
			return Step{Next: f.State, Adopt: true, Reason: fmt.Sprintf("the node advertises what MIG configuration %q makes already: "+
				"taken as applied, nothing restarts", f.Desired)}
		}
		if changed && f.Refused == "" {
			return Step{Next: gpuv1.MIGReconfigureRequired, Reason: fmt.Sprintf("MIG configuration %q requested, %s applied", f.Desired, display(f.Applied))}
		}
		return stay
	case gpuv1.MIGReconfigureRequired:
		switch {
		case !changed && (!f.Lost || f.Desired == ""):
			return Step{Next: "", Reason: fmt.Sprintf("MIG configuration %s is applied already", display(f.Applied))}
		case f.Refused == "" && f.Applied == "" && f.InPlace == Matches:
			return Step{Next: "", Adopt: true, Reason: fmt.Sprintf("the node advertises what MIG configuration %q makes already: "+
				"taken as applied, nothing restarts", f.Desired)}
		case f.Applied == "" && f.InPlace == Unknown && elapsed < InPlaceWait:
			return stay // its device plugin and GFD settle first
		case f.Refused != "" || !f.Admitted:
			return stay
		case f.Lost && !changed:
			// No eviction: the devices the GPU pods used are gone, or,
			// where the new driver pod did not reload the driver (the
			// same version), still there, and mig-manager finds them
			// applied and touches nothing (mig-parted v0.12.1,
			// reconfigure-mig.sh asserts first).
			return Step{Next: gpuv1.MIGClientsOff, Target: f.Desired,
				Reason: fmt.Sprintf("applying %q again: tainted, the device plugin, GFD and dcgm-exporter leave the node; no GPU pod is evicted", f.Desired)}
		}
		return Step{Next: gpuv1.MIGEviction, Target: f.Desired,
			Reason: fmt.Sprintf("reconfiguring to %q: tainted, evicting the GPU pods", f.Desired)}
	case gpuv1.MIGEviction:
		switch {
		case f.GPUPods == 0:
			return Step{Next: gpuv1.MIGClientsOff, Reason: "no GPU pod left: the device plugin, GFD and dcgm-exporter leave the node"}
		case elapsed >= p.EvictionTimeout:
			// The GPUs are untouched: the node serves on, untainted, and
			// waits for its turn again, behind the nodes waiting already.
			return Step{Next: gpuv1.MIGReconfigureRequired, Reason: fmt.Sprintf("%d GPU pod(s) left after %s (PodDisruptionBudgets?): "+
				"untainted, back in the queue", f.GPUPods, p.EvictionTimeout)}
		}
		return Step{Next: f.State, Action: EvictGPUPods}
	case gpuv1.MIGClientsOff:
		switch {
		case f.ClientPods == 0:
			return Step{Next: gpuv1.MIGApply, Action: StartAttempt, Target: f.Target,
				Reason: fmt.Sprintf("mig-manager applies %q (attempt 1 of %d)", f.Target, MaxAttempts)}
		case elapsed >= ClientsOffTimeout:
			return Step{Next: gpuv1.MIGReconfigureRequired, Reason: fmt.Sprintf("%d device plugin, GFD or dcgm-exporter pod(s) still on the node after %s: "+
				"untainted, back in the queue", f.ClientPods, ClientsOffTimeout)}
		}
		return stay
	case gpuv1.MIGApply:
		return apply(f, p)
	case gpuv1.MIGValidation:
		switch {
		case f.Lost:
			// What the device plugin advertised, if anything, was made
			// under the driver before: the GPU clients leave again, and
			// the configuration is applied again.
			return Step{Next: gpuv1.MIGClientsOff, Target: f.Applied,
				Reason: fmt.Sprintf("the node rebooted or loaded a new driver during the validation: the MIG devices of %q are gone, "+
					"it is applied again once the device plugin, GFD and dcgm-exporter left", f.Applied)}
		case f.Advertised == Matches:
			return Step{Next: gpuv1.MIGReconfigureDone, Reason: fmt.Sprintf("the device plugin advertises MIG configuration %q: untainted", f.Applied)}
		case elapsed >= p.ValidationTimeout:
			why := "the device plugin was not back"
			if f.Advertised == Differs {
				why = f.Mismatch
			}
			return Step{Next: gpuv1.MIGReconfigureFailed, Reason: fmt.Sprintf("%s within %s of applying %q", why, p.ValidationTimeout, f.Applied)}
		}
		return stay
	case gpuv1.MIGReconfigureFailed:
		// The node holds its place in the budget and is off service: a
		// new configuration starts over without waiting for another.
		switch {
		case f.Desired == "":
			return Step{Next: "", Reason: "no MIG configuration is requested any more: untainted, the GPUs as they are"}
		case f.Desired != f.Target && f.Refused == "":
			return Step{Next: gpuv1.MIGEviction, Target: f.Desired, Reason: fmt.Sprintf("MIG configuration %q requested: starting over", f.Desired)}
		}
		return stay
	}
	// A value no step writes (a person's typo): start from the beginning.
	return Step{Next: "", Reason: fmt.Sprintf("unknown state %q", f.State)}
}

// apply steps the apply: mig-manager's word on its attempt, a person's
// new configuration, or an attempt that ran out of time.
func apply(f Facts, p Policy) Step {
	switch {
	case f.Desired != "" && f.Desired != f.Target:
		// mig-manager would apply the new label itself, if it still runs:
		// a fresh attempt makes sure which configuration succeeded.
		return Step{Next: gpuv1.MIGApply, Action: StartAttempt, Target: f.Desired,
			Reason: fmt.Sprintf("MIG configuration %q requested during the apply of %q: applying it (attempt 1 of %d)", f.Desired, f.Target, MaxAttempts)}
	case f.ConfigState == gpuv1.MIGConfigSuccess:
		return Step{Next: gpuv1.MIGValidation, Target: f.Target,
			Reason: fmt.Sprintf("mig-manager applied %q: the device plugin, GFD and dcgm-exporter come back", f.Target)}
	}
	since := f.Now.Sub(f.AttemptSince)
	var why string
	switch {
	case f.ConfigState == gpuv1.MIGConfigFailed:
		why = "mig-manager reported failed (its pod's log says why)"
		if since < retryBackoff(f.Attempt) && f.Attempt < MaxAttempts {
			return Step{Next: f.State}
		}
	case since >= p.ApplyTimeout:
		why = fmt.Sprintf("no result within %s (nvidia.com/mig.config.state is %q)", p.ApplyTimeout, f.ConfigState)
	default:
		return Step{Next: f.State}
	}
	if f.Attempt >= MaxAttempts {
		return Step{Next: gpuv1.MIGReconfigureFailed, Reason: fmt.Sprintf("applying %q: attempt %d of %d: %s", f.Target, f.Attempt, MaxAttempts, why)}
	}
	return Step{Next: gpuv1.MIGApply, Action: StartAttempt, Target: f.Target,
		Reason: fmt.Sprintf("applying %q: attempt %d of %d: %s; retrying (attempt %d)", f.Target, f.Attempt, MaxAttempts, why, f.Attempt+1)}
}

func display(config string) string {
	if config == "" {
		return "none"
	}
	return fmt.Sprintf("%q", config)
}
