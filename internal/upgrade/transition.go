package upgrade

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
	Cordon
	EvictGPUPods
	Drain
	DeleteDriverPod
	Uncordon
)

func (a Action) String() string {
	return [...]string{"none", "cordon", "evict GPU pods", "drain", "delete the driver pod", "uncordon"}[a]
}

// Policy is the part of the upgrade policy transitions read.
type Policy struct {
	AutoUpgrade        bool
	WaitTimeout        time.Duration // 0: wait for ever
	PodDeletionTimeout time.Duration // 0: wait for ever
	DrainEnabled       bool
	DrainTimeout       time.Duration // 0: wait for ever
	// ValidationTimeout bounds how long a new driver may take to be ready
	// with the device plugin registered before the node's upgrade fails
	// (timers.DriverValidationTimeout).
	ValidationTimeout time.Duration
	// PodRestartTimeout bounds how long the operands after the driver may
	// take to leave the node, and the old driver pod to go, before the
	// node's upgrade fails rather than waiting for ever
	// (timers.DriverReplaceTimeout).
	PodRestartTimeout time.Duration
	// SkipGPUPodEviction goes from the eviction of GPU pods straight to
	// the drain: driver.manager's ENABLE_GPU_POD_EVICTION false, for a
	// driver pod replaced by hand.
	SkipGPUPodEviction bool
	// LeaveReplaced leaves a node whose driver pod was replaced by hand as
	// it is: driver.manager neither evicts nor drains.
	LeaveReplaced bool
}

// Facts is what is known about one node.
type Facts struct {
	State gpuv1.UpgradeState // "" when the node has no upgrade label
	// Since is when the node entered State.
	Since time.Time
	Now   time.Time
	// Skip is the node's nvidia.com/gpu-driver-upgrade.skip=true.
	Skip bool
	// Cordoned is true while the upgrade holds a cordon on the node.
	Cordoned bool
	// Outdated is true when the node's driver pod runs an older spec than
	// its DaemonSet.
	Outdated bool
	// DriverReady is true when the node's driver pod is ready.
	DriverReady bool
	// Admitted is true when the pool's budget lets this node start.
	Admitted bool
	// JobsRunning counts the pods waitForCompletion waits for.
	JobsRunning int
	// GPUPods counts the pods still using the GPU on the node.
	GPUPods int
	// DrainPods counts the pods a drain still has to evict.
	DrainPods int
	// DownstreamPods counts the operand pods after the driver still on the
	// node; the driver pod is replaced only once they are gone.
	DownstreamPods int
	// Validated is true when the new driver is ready, the device plugin is
	// ready again and the node advertises nvidia.com/gpu.
	Validated bool
	// ReplacedByHand is true on an upgrade-required node whose outdated
	// driver pod was replaced outside the upgrade (a person deleted it, to
	// upgrade by hand as NVIDIA's documentation has it with autoUpgrade
	// off) by one its DaemonSet made at its current spec: the new driver
	// cannot load while GPU pods hold the old one.
	ReplacedByHand bool
	// OutdatedPodGone is true on an upgrade-required node whose outdated
	// driver pod is gone and no new one runs yet.
	OutdatedPodGone bool
}

// Step is a transition: the next state, the action that gets there, and why.
type Step struct {
	Next   gpuv1.UpgradeState
	Action Action
	Reason string
	// FirstMark is the first upgrade-done of a node that never upgraded:
	// bookkeeping, no step of an upgrade, so no event tells of it.
	FirstMark bool
	// ByHand starts the steps that follow a driver pod replaced by hand.
	ByHand bool
}

// Next is the transition table: one step per call.
func Next(f Facts, p Policy) Step {
	stay := Step{Next: f.State}
	elapsed := f.Now.Sub(f.Since)
	timedOut := func(limit time.Duration) bool { return limit > 0 && elapsed >= limit }

	switch f.State {
	case "", gpuv1.UpgradeDone:
		switch {
		case f.Outdated && !f.Skip:
			return Step{Next: gpuv1.UpgradeRequired, Reason: "the driver changed"}
		case f.Cordoned:
			return Step{Next: gpuv1.UpgradeUncordon, Reason: "a cordon of an earlier upgrade is still held"}
		case f.State == "" && f.DriverReady && !f.Outdated && !f.Skip && p.AutoUpgrade:
			// As NVIDIA's upgrade controller marks a node whose driver pod
			// is in sync with its DaemonSet (k8s-operator-libs
			// pkg/upgrade/common_manager.go, ProcessDoneOrUnknownNodes):
			// runbooks and alerts count upgrade-done nodes, and a node that
			// never needed an upgrade is one of them. With autoUpgrade off
			// NVIDIA's controller does not run, and marks nothing. Once
			// the pod is ready, not as soon as it is made: a rollout still
			// changing the DaemonSet would flip the node between done and
			// required, a write each time.
			return Step{Next: gpuv1.UpgradeDone, Reason: "the driver pod runs the current driver", FirstMark: true}
		}
		return stay
	case gpuv1.UpgradeRequired:
		switch {
		case f.ReplacedByHand && (f.Skip || p.LeaveReplaced):
			// As NVIDIA's driver manager: nothing it is set to evict.
			return Step{Next: gpuv1.UpgradeDone, Reason: "the driver pod was replaced outside the upgrade; " + leftAlone(f)}
		case f.ReplacedByHand && !f.Admitted:
			return stay
		case f.ReplacedByHand:
			return Step{Next: gpuv1.UpgradeCordonRequired, ByHand: true,
				Reason: "the driver pod was replaced outside the upgrade: the GPU pods leave before its new driver loads"}
		case f.OutdatedPodGone:
			return stay // its replacement says what follows
		case !f.Outdated && f.Cordoned:
			// A failed node retried after its driver became current again:
			// the cordon its upgrade took must not outlive it.
			return Step{Next: gpuv1.UpgradeUncordon, Reason: "the driver is current again"}
		case !f.Outdated:
			return Step{Next: gpuv1.UpgradeDone, Reason: "the driver is current again"}
		case f.Skip || !p.AutoUpgrade || !f.Admitted:
			return stay
		}
		return Step{Next: gpuv1.UpgradeCordonRequired, Reason: "starting the upgrade"}
	case gpuv1.UpgradeCordonRequired:
		return Step{Next: gpuv1.UpgradeWaitForJobs, Action: Cordon, Reason: "cordoned"}
	case gpuv1.UpgradeWaitForJobs:
		switch {
		case f.JobsRunning == 0:
			return Step{Next: gpuv1.UpgradePodDeletion, Reason: "no job to wait for"}
		case timedOut(p.WaitTimeout):
			return Step{Next: gpuv1.UpgradePodDeletion, Reason: fmt.Sprintf("stopped waiting for %d jobs after %s", f.JobsRunning, p.WaitTimeout)}
		}
		return stay
	case gpuv1.UpgradePodDeletion:
		switch {
		case f.GPUPods == 0:
			return Step{Next: gpuv1.UpgradePodRestart, Reason: "no GPU pod left"}
		case p.SkipGPUPodEviction && p.DrainEnabled:
			return Step{Next: gpuv1.UpgradeDrainRequired, Reason: fmt.Sprintf("%d GPU pods on the node and driver.manager does not evict them: draining", f.GPUPods)}
		case p.SkipGPUPodEviction:
			// driver.manager changed meanwhile to evict nothing: the node
			// is let go, as it would have been from the start.
			return Step{Next: gpuv1.UpgradeUncordon, Reason: fmt.Sprintf("%d GPU pods on the node and driver.manager now evicts nothing: "+
				"the node is let go, and its new driver loads once they end", f.GPUPods)}
		case timedOut(p.PodDeletionTimeout) && p.DrainEnabled:
			return Step{Next: gpuv1.UpgradeDrainRequired, Reason: fmt.Sprintf("%d GPU pods left after %s: draining", f.GPUPods, p.PodDeletionTimeout)}
		case timedOut(p.PodDeletionTimeout):
			return Step{Next: gpuv1.UpgradeFailed, Reason: fmt.Sprintf("%d GPU pods left after %s and drain is disabled", f.GPUPods, p.PodDeletionTimeout)}
		}
		return Step{Next: f.State, Action: EvictGPUPods}
	case gpuv1.UpgradeDrainRequired:
		switch {
		case f.DrainPods == 0 && f.GPUPods == 0:
			return Step{Next: gpuv1.UpgradePodRestart, Reason: "drained"}
		case timedOut(p.DrainTimeout):
			return Step{Next: gpuv1.UpgradeFailed, Reason: fmt.Sprintf("%d pods left after draining for %s", f.DrainPods+f.GPUPods, p.DrainTimeout)}
		}
		return Step{Next: f.State, Action: Drain}
	case gpuv1.UpgradePodRestart:
		switch {
		case !f.Outdated:
			return Step{Next: gpuv1.UpgradeValidation, Reason: "the new driver pod is running"}
		case timedOut(p.PodRestartTimeout):
			return Step{Next: gpuv1.UpgradeFailed, Reason: fmt.Sprintf("the driver pod was not replaced within %s (%d operand pods after the driver still on the node)",
				p.PodRestartTimeout, f.DownstreamPods)}
		case f.DownstreamPods > 0:
			return stay // their pods are leaving the node first
		}
		return Step{Next: f.State, Action: DeleteDriverPod}
	case gpuv1.UpgradeValidation:
		switch {
		case f.Outdated:
			// The version changed again while the new driver started: the
			// node is still drained, so it replaces the driver once more.
			return Step{Next: gpuv1.UpgradePodRestart, Reason: "the driver changed again during validation"}
		case f.Validated:
			return Step{Next: gpuv1.UpgradeUncordon, Reason: "the new driver works: the device plugin advertises the GPUs again"}
		case timedOut(p.ValidationTimeout):
			return Step{Next: gpuv1.UpgradeFailed, Reason: fmt.Sprintf("the new driver was not ready after %s", p.ValidationTimeout)}
		}
		return stay
	case gpuv1.UpgradeUncordon:
		return Step{Next: gpuv1.UpgradeDone, Action: Uncordon, Reason: "upgraded"}
	case gpuv1.UpgradeFailed:
		return stay // a person relabels the node upgrade-required to retry
	}
	return Step{Next: gpuv1.UpgradeRequired, Reason: fmt.Sprintf("unknown state %q", f.State)}
}

// leftAlone says why a node whose driver pod was replaced by hand is left
// as it is.
func leftAlone(f Facts) string {
	if f.Skip {
		return "the node is labelled nvidia.com/gpu-driver-upgrade.skip: nothing is evicted"
	}
	return "driver.manager's ENABLE_GPU_POD_EVICTION and ENABLE_AUTO_DRAIN are false: nothing is evicted, and the new driver loads once the GPU pods end"
}

// Holds reports whether a state keeps the node for its upgrade: in
// progress, or failed with its cordon kept until a person acts.
func Holds(s gpuv1.UpgradeState) bool { return InProgress(s) || s == gpuv1.UpgradeFailed }

// InProgress reports whether a state holds the node between its cordon and
// its uncordon: it counts against the budget.
func InProgress(s gpuv1.UpgradeState) bool {
	switch s {
	case gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs, gpuv1.UpgradePodDeletion,
		gpuv1.UpgradeDrainRequired, gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation, gpuv1.UpgradeUncordon:
		return true
	}
	return false
}
