package remediation

import (
	"fmt"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Action is what the controller does for a node before writing its next
// state.
type Action int

// Actions of the state machine.
const (
	None Action = iota
	EvictGPUPods
	RestartDevicePlugin
	DeleteDriverPod
)

func (a Action) String() string {
	return [...]string{"none", "evict GPU pods", "restart the device plugin", "delete the driver pod"}[a]
}

// Health is what a device plugin that started after a repair step says of
// the node's GPUs.
type Health int

// Health values.
const (
	// Unknown: no such plugin has settled yet.
	Unknown Health = iota
	Healthy
	Unhealthy
)

// Policy is the part of spec.operator.remediation transitions read.
type Policy struct {
	AutoStart         bool
	EvictionTimeout   time.Duration
	ValidationTimeout time.Duration
	// DriverReplaceTimeout bounds how long the operands after the driver
	// may take to leave the node and the driver pod to be replaced, as in
	// a driver upgrade (timers.DriverReplaceTimeout).
	DriverReplaceTimeout time.Duration
	// RecurrenceWindow is how soon after a repair GPUs unhealthy again
	// show that restarts do not hold: the next repair goes from the
	// eviction straight to reboot-required, rather than evicting the
	// node's GPU pods again and again (timers.RepairRecurrenceWindow).
	RecurrenceWindow time.Duration
}

// Facts is what is known about one node.
type Facts struct {
	State gpuv1.RemediationState // "" when the node has no remediation label
	// Since is when the node entered State.
	Since time.Time
	Now   time.Time
	// UnhealthyGPUs is the node controller's last count of the node's
	// unhealthy GPUs, judged from a settled device plugin.
	UnhealthyGPUs int64
	// Approved is the node's nvidia.com/gpu-remediation.approved=true.
	Approved bool
	// Admitted is true when the arbiter lets this node's repair start:
	// the holder table (a driver upgrade due on the node goes first where
	// its budget has room: it replaces the driver anyway) and the budget.
	Admitted bool
	// DriverOutdated is true when the node's driver pod runs an older spec
	// than its DaemonSet: a new pod would be an upgrade, which only the
	// upgrade does (a node kept out of upgrades stays on its driver).
	DriverOutdated bool
	// UpgradeHeld is true when the driver upgrade will not replace an
	// outdated driver on its own: autoUpgrade is off, the node is
	// labelled nvidia.com/gpu-driver-upgrade.skip=true, or its upgrade
	// failed and waits for a person (arbiter.UpgradeHeld).
	UpgradeHeld bool
	// Recurrent is true when the node's last repair ended less than
	// Policy.RecurrenceWindow before its GPUs went unhealthy again.
	Recurrent bool
	// GPUPods counts the pods still using the GPU on the node.
	GPUPods int
	// PluginToReplace is true while the device plugin pod this step
	// replaces is still on the node.
	PluginToReplace bool
	// Plugin is what a device plugin started after the step says.
	Plugin Health
	// DriverReloadable is true when the node runs the operator's driver
	// container, which a reload replaces; false on a host driver.
	DriverReloadable bool
	// DriverReplaced is true once a driver pod other than the one this
	// step replaces is on the node.
	DriverReplaced bool
	// DownstreamPods counts the operand pods after the driver still on the
	// node; the driver pod is replaced only once they are gone.
	DownstreamPods int
	// Rebooted is true when the node booted since it was marked
	// reboot-required or failed.
	Rebooted bool
	// AfterReboot is true when the validation follows a reboot.
	AfterReboot bool
}

// Step is a transition: the next state, the action that gets there, and why.
type Step struct {
	Next   gpuv1.RemediationState
	Action Action
	Reason string
}

// Next is the transition table: one step per call.
func Next(f Facts, p Policy) Step {
	stay := Step{Next: f.State}
	elapsed := f.Now.Sub(f.Since)
	switch f.State {
	case "", gpuv1.RemediationDone:
		if f.UnhealthyGPUs > 0 {
			return Step{Next: gpuv1.RemediationRequired, Reason: fmt.Sprintf("%d GPU(s) unhealthy", f.UnhealthyGPUs)}
		}
		return stay
	case gpuv1.RemediationRequired:
		switch {
		case f.UnhealthyGPUs == 0:
			return Step{Next: "", Reason: "the GPUs are healthy again"}
		case (!p.AutoStart && !f.Approved) || !f.Admitted:
			return stay
		}
		return Step{Next: gpuv1.RemediationEviction, Reason: fmt.Sprintf("starting the repair of %d unhealthy GPU(s): tainted", f.UnhealthyGPUs)}
	case gpuv1.RemediationEviction:
		switch {
		case f.GPUPods == 0 && f.Recurrent:
			return Step{Next: gpuv1.RemediationRebootRequired, Reason: fmt.Sprintf("no GPU pod left, and the GPUs are unhealthy again within %s of the last repair: "+
				"restarting the device plugin or the driver does not hold", p.RecurrenceWindow)}
		case f.GPUPods == 0:
			return Step{Next: gpuv1.RemediationDevicePluginRestart, Reason: "no GPU pod left"}
		case elapsed >= p.EvictionTimeout:
			return Step{Next: gpuv1.RemediationFailed, Reason: fmt.Sprintf("%d GPU pod(s) left after %s", f.GPUPods, p.EvictionTimeout)}
		}
		return Step{Next: f.State, Action: EvictGPUPods}
	case gpuv1.RemediationDevicePluginRestart:
		switch {
		case f.PluginToReplace:
			return Step{Next: f.State, Action: RestartDevicePlugin}
		case f.Plugin == Healthy:
			return Step{Next: gpuv1.RemediationDone, Reason: "the restarted device plugin reports every GPU healthy"}
		case f.Plugin == Unhealthy || elapsed >= p.ValidationTimeout:
			why := "the restarted device plugin still reports unhealthy GPUs"
			if f.Plugin != Unhealthy {
				why = fmt.Sprintf("the device plugin was not back within %s", p.ValidationTimeout)
			}
			if next, blocked := reloadBlocked(f); blocked != "" {
				return Step{Next: next, Reason: why + ", and " + blocked}
			}
			return Step{Next: gpuv1.RemediationDriverReload, Reason: why + ": reloading the driver"}
		}
		return stay
	case gpuv1.RemediationDriverReload:
		switch {
		case f.DriverReplaced:
			return Step{Next: gpuv1.RemediationValidation, Reason: "the driver pod was replaced"}
		case !f.DriverReloadable || f.DriverOutdated:
			next, blocked := reloadBlocked(f)
			return Step{Next: next, Reason: blocked}
		case elapsed >= p.DriverReplaceTimeout:
			return Step{Next: gpuv1.RemediationRebootRequired, Reason: fmt.Sprintf("the driver pod was not replaced within %s (%d operand pods after the driver still on the node)",
				p.DriverReplaceTimeout, f.DownstreamPods)}
		case f.DownstreamPods > 0:
			return stay // their pods are leaving the node first
		}
		return Step{Next: f.State, Action: DeleteDriverPod}
	case gpuv1.RemediationValidation:
		failed, after := gpuv1.RemediationRebootRequired, "after the driver reload"
		if f.AfterReboot {
			failed, after = gpuv1.RemediationFailed, "after a reboot"
		}
		switch {
		case f.Plugin == Healthy:
			return Step{Next: gpuv1.RemediationDone, Reason: "every GPU is healthy " + after}
		case f.Plugin == Unhealthy:
			return Step{Next: failed, Reason: fmt.Sprintf("%d GPU(s) still unhealthy %s", f.UnhealthyGPUs, after)}
		case elapsed >= p.ValidationTimeout:
			return Step{Next: failed, Reason: fmt.Sprintf("the GPU stack was not ready within %s %s", p.ValidationTimeout, after)}
		}
		return stay
	case gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed:
		// The node holds its place in the budget: starting over needs no
		// other. A driver upgrade may take the node over meanwhile
		// (arbiter.Table); a reboot, healed GPUs or an approval are
		// answered whatever holds the node.
		switch {
		case f.Plugin == Healthy:
			return Step{Next: gpuv1.RemediationDone, Reason: "the device plugin reports every GPU healthy again"}
		case f.Rebooted:
			return Step{Next: gpuv1.RemediationValidation, Reason: "the node rebooted"}
		case f.Approved:
			return Step{Next: gpuv1.RemediationEviction, Reason: "approved again: starting the repair over"}
		}
		return stay
	}
	return Step{Next: "", Reason: fmt.Sprintf("unknown state %q", f.State)}
}

// reloadBlocked says why the node's driver cannot be reloaded, and where
// the node goes instead; "" when it can be. A reload of an outdated driver
// would be an upgrade, which only the driver upgrade does. The node asks
// for a reboot, tainted and parked, rather than go back to wait for the
// upgrade: untainted, its unhealthy GPUs would take workloads for as long
// as the upgrade waits for a place in its budget (a whole rollout, or for
// ever behind a failed node), and each new attempt would restart the
// device plugin again (issue 52, finding 2). The upgrade takes the parked
// node over when its turn comes (arbiter.Table), and a new driver that
// heals the GPUs ends the repair.
func reloadBlocked(f Facts) (gpuv1.RemediationState, string) {
	switch {
	case !f.DriverReloadable:
		return gpuv1.RemediationRebootRequired, "the driver is on the host: no driver container to reload"
	case f.DriverOutdated && f.UpgradeHeld:
		return gpuv1.RemediationRebootRequired, "the driver pod runs an older spec than its DaemonSet: a reload would upgrade the driver, " +
			"which the driver upgrade holds back on this node (autoUpgrade off, nvidia.com/gpu-driver-upgrade.skip, or its upgrade failed)"
	case f.DriverOutdated:
		return gpuv1.RemediationRebootRequired, "the driver pod runs an older spec than its DaemonSet: a reload would upgrade the driver, " +
			"which only the driver upgrade does; it takes the node over when its turn comes, and a reboot meanwhile repairs in place"
	}
	return "", ""
}

// InProgress reports whether a state holds the node out of service for its
// repair: it counts against the budget.
func InProgress(s gpuv1.RemediationState) bool {
	switch s {
	case gpuv1.RemediationEviction, gpuv1.RemediationDevicePluginRestart, gpuv1.RemediationDriverReload,
		gpuv1.RemediationValidation:
		return true
	}
	return false
}

// Tainted reports whether a state keeps nvidia.com/gpu.unhealthy on the
// node: from the start of the repair until the GPUs are healthy, and while
// a person or a reboot must act. A tainted node is out of service for its
// repair: it takes a place in the budget, repairs' and upgrades' alike.
func Tainted(s gpuv1.RemediationState) bool {
	return InProgress(s) || s == gpuv1.RemediationRebootRequired || s == gpuv1.RemediationFailed
}

// ReloadsDriver reports whether a state replaces the node's driver pod, so
// that the operands after the driver leave the node first.
func ReloadsDriver(s gpuv1.RemediationState) bool { return s == gpuv1.RemediationDriverReload }
