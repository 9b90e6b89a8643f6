package migreconfig

import (
	"fmt"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// MaxAttempts is how many mig-manager pods try to apply a configuration
// before the node's reconfiguration fails.
const MaxAttempts = 3

// MaxRequeues is how many times a reconfiguration goes back to the queue,
// its GPU pods or clients not gone in time, before it fails: a node whose
// pods never leave must not cycle through the queue unseen.
const MaxRequeues = 3

// retryBackoff is how long after its start a failed attempt is retried:
// the policy's backoff after the first, doubling after each, so that a
// configuration that cannot apply (a profile the GPU does not have) does
// not spin.
func (p Policy) retryBackoff(attempt int) time.Duration { return p.RetryBackoff << (attempt - 1) }

// Action is what the controller does for a node before writing its next
// state.
type Action int

// Actions of the state machine.
const (
	None Action = iota
	EvictGPUPods
	// StartAttempt marks nvidia.com/mig.config.state pending once no
	// mig-manager pod is left on the node: the one its DaemonSet starts
	// for the apply step is the attempt's, and applies the node's
	// configuration; no pod of an attempt before can write its word.
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
	// InPlaceWait bounds how long a serving node with no configuration
	// known applied waits for its device plugin and GFD to settle, to
	// learn whether it has the requested layout already, before it is
	// reconfigured anyway (timers.MIGInPlaceWait).
	InPlaceWait time.Duration
	// ClientsOffTimeout bounds how long the device plugin, GFD and
	// dcgm-exporter may take to leave the node
	// (timers.MIGClientsOffTimeout).
	ClientsOffTimeout time.Duration
	// RetryBackoff is how long after its start the first failed attempt
	// is retried (timers.MIGRetryBackoff).
	RetryBackoff time.Duration
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
	// ManagerPods counts the mig-manager pods on the node, terminating
	// ones included: a new attempt starts only once there are none.
	ManagerPods int
	// ConfigState is mig-manager's nvidia.com/mig.config.state, once the
	// attempt's own pod runs (identified by its UID); "" before.
	ConfigState string
	// AttemptPodGone is true when the pod of the attempt under way has
	// left the node, or another replaced it, without a word.
	AttemptPodGone bool
	// Requeues counts how many times the reconfiguration went back to the
	// queue.
	Requeues int
	// Attempt is the number of the apply attempt under way (1 for the
	// first), or, back at clients-off for a retry, of the attempt that
	// ended; AttemptSince is when it started.
	Attempt      int
	AttemptSince time.Time
	// InPlace says, where no configuration is known applied, whether the
	// node's settled device plugin advertises exactly what Desired makes
	// (whole GPUs, where MIG is disabled already): Matches takes it as
	// applied, with nothing evicted or restarted; Unknown waits, up to
	// Policy.InPlaceWait, for the plugin and GFD of a serving node to settle.
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
	// Attempt is the number of the apply attempt the step starts
	// (StartAttempt), or goes back to clients-off to start (Retry).
	Attempt int
	// Retry says the step leaves the apply for a new attempt of the same
	// target: the attempt's pod leaves with the apply step's gate, and
	// the attempt after it starts once it is gone.
	Retry bool
	// Requeue says the step sends the node back to the queue.
	Requeue bool
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
		case f.Applied == "" && f.InPlace == Unknown && elapsed < p.InPlaceWait:
			return stay // its device plugin and GFD settle first
		case f.Refused != "" || !f.Admitted:
			return stay
		case f.Lost && !changed:
			// No eviction: the devices the GPU pods used are gone, or,
			// where the new driver pod did not reload the driver (the
			// same version), still there, and mig-manager finds them
			// applied and touches nothing (mig-parted v0.15.0,
			// pkg/mig/reconfigure/reconfigure.go asserts first).
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
			return requeue(f, fmt.Sprintf("%d GPU pod(s) left after %s (PodDisruptionBudgets?)", f.GPUPods, p.EvictionTimeout))
		}
		return Step{Next: f.State, Action: EvictGPUPods}
	case gpuv1.MIGClientsOff:
		switch {
		case f.ClientPods == 0 && f.ManagerPods == 0:
			attempt := max(f.Attempt, 0) + 1
			return Step{Next: gpuv1.MIGApply, Action: StartAttempt, Target: f.Target, Attempt: attempt,
				Reason: fmt.Sprintf("mig-manager applies %q (attempt %d of %d)", f.Target, attempt, MaxAttempts)}
		case elapsed >= p.ClientsOffTimeout:
			return requeue(f, fmt.Sprintf("%d device plugin, GFD, dcgm-exporter or mig-manager pod(s) still on the node after %s",
				f.ClientPods+f.ManagerPods, p.ClientsOffTimeout))
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
			return Step{Next: gpuv1.MIGReconfigureDone, Reason: fmt.Sprintf("the node's GPU plugin (the device plugin, or the DRA driver) serves MIG configuration %q: untainted", f.Applied)}
		case elapsed >= p.ValidationTimeout:
			why := "the node's GPU plugin (the device plugin, or the DRA driver) was not back"
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
// new configuration, or an attempt that ran out of time. A new attempt
// goes back to clients-off, so that the attempt's pod leaves the node
// with the apply step's gate before the next one starts.
func apply(f Facts, p Policy) Step {
	switch {
	case f.Desired != "" && f.Desired != f.Target:
		// mig-manager would apply the new label itself, if it still runs:
		// a fresh attempt makes sure which configuration succeeded.
		return Step{Next: gpuv1.MIGClientsOff, Target: f.Desired,
			Reason: fmt.Sprintf("MIG configuration %q requested during the apply of %q: mig-manager leaves the node, then applies it", f.Desired, f.Target)}
	case f.ConfigState == gpuv1.MIGConfigSuccess:
		return Step{Next: gpuv1.MIGValidation, Target: f.Target,
			Reason: fmt.Sprintf("mig-manager applied %q: the device plugin, GFD and dcgm-exporter come back", f.Target)}
	}
	since := f.Now.Sub(f.AttemptSince)
	var why string
	switch {
	case f.ConfigState == gpuv1.MIGConfigFailed:
		why = "mig-manager reported failed (its pod's log says why)"
		if since < p.retryBackoff(f.Attempt) && f.Attempt < MaxAttempts {
			return Step{Next: f.State}
		}
	case f.AttemptPodGone:
		why = "the attempt's mig-manager pod left the node without a word"
	case since >= p.ApplyTimeout:
		why = fmt.Sprintf("no result within %s (nvidia.com/mig.config.state is %q)", p.ApplyTimeout, f.ConfigState)
	default:
		return Step{Next: f.State}
	}
	if f.Attempt >= MaxAttempts {
		return Step{Next: gpuv1.MIGReconfigureFailed, Reason: fmt.Sprintf("applying %q: attempt %d of %d: %s", f.Target, f.Attempt, MaxAttempts, why)}
	}
	return Step{Next: gpuv1.MIGClientsOff, Target: f.Target, Retry: true, Attempt: f.Attempt,
		Reason: fmt.Sprintf("applying %q: attempt %d of %d: %s; its mig-manager leaves, then attempt %d starts", f.Target, f.Attempt, MaxAttempts, why, f.Attempt+1)}
}

// requeue sends the node back to the queue, untainted, its GPUs untouched,
// or, after MaxRequeues, fails it: a node whose pods never leave is for a
// person to look at, not for the queue to turn for ever.
func requeue(f Facts, why string) Step {
	if f.Requeues+1 >= MaxRequeues {
		return Step{Next: gpuv1.MIGReconfigureFailed,
			Reason: fmt.Sprintf("%s, and the node went back to the queue %d times already: it is left to a person", why, f.Requeues)}
	}
	return Step{Next: gpuv1.MIGReconfigureRequired, Requeue: true,
		Reason: fmt.Sprintf("%s: untainted, back in the queue (%d of %d)", why, f.Requeues+1, MaxRequeues)}
}

func display(config string) string {
	if config == "" {
		return "none"
	}
	return fmt.Sprintf("%q", config)
}
