package gating

import (
	"fmt"
	"slices"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// judge decides one state's value on the node, given the values of the
// states before it, and says why when the value is not ready.
func (d *decision) judge(name state.Name) gpuv1.StateValue {
	if d.disabled(name) {
		delete(d.notBefore, name)
		if name == state.CUDAWorkload && d.in.Pods[name] != nil {
			// Turned off: its records go.
			d.result.StalePods = append(d.result.StalePods, name)
		}
		return gpuv1.StateDisabled
	}
	if d.driverRestarting() && (name == state.Driver || slices.Contains(d.in.Graph.Downstream(state.Driver), name)) {
		// The driver pod is about to be replaced: with the driver no longer
		// ready, everything after it leaves the node first, and starts again
		// in order once the new driver is ready. The reset is when that
		// began, stamped once: stamping every decision would change the
		// node each second the step lasts, and each write would wake this
		// controller, and the maintenance one, to write it again.
		if _, reset := d.notBefore[name]; !reset && name != state.Driver {
			d.notBefore[name] = d.now
		}
		return d.because(name, gpuv1.StateUpgrading, "the driver pod is being replaced")
	}
	cur := d.current[name]
	if why := d.cannotRun(name); why != "" {
		if cur != gpuv1.StateFailed {
			d.leave(name, cur, gpuv1.StateFailed, why)
		}
		return d.because(name, gpuv1.StateFailed, why)
	}
	if name == state.Driver && d.noDriverUntilImage() {
		return d.because(name, gpuv1.StatePending, d.in.DriverAwaitsImage)
	}
	prereqs := d.in.Graph.Prerequisites(name)
	if cur != gpuv1.StateReady {
		// Not started yet, or started again: it waits for what it starts
		// after too.
		prereqs = d.in.Graph.StartPrerequisites(name)
	}
	for _, p := range prereqs {
		if v := d.values[p]; v != gpuv1.StateReady && v != gpuv1.StateDisabled {
			return d.because(name, gpuv1.StatePending, "waiting for "+string(p))
		}
	}
	if name == state.MIGManager {
		return d.judgeMIG(cur)
	}
	if name == state.CUDAWorkload {
		return d.judgeWorkload(cur)
	}
	if name == state.Driver && d.in.DriverUnloading {
		// Whatever pod replaces it, the driver the states after it were
		// started against is going away: they restart at once.
		if cur == gpuv1.StateReady {
			d.leave(name, cur, gpuv1.StatePending, "the driver pod is terminating: the driver is being unloaded")
		}
		return d.because(name, gpuv1.StatePending, "the previous driver pod is terminating")
	}
	pod := d.in.Pods[name]
	if pod == nil {
		return d.judgeMissing(name, cur)
	}
	switch {
	case pod.Failure != "":
		if cur != gpuv1.StateFailed {
			d.leave(name, cur, gpuv1.StateFailed, pod.Failure)
		}
		return d.because(name, gpuv1.StateFailed, pod.Failure)
	case pod.Ready && pod.Since.Before(d.notBefore[name]) && name == state.Driver:
		if !d.staleDriverAccepted() {
			return d.because(name, gpuv1.StatePending, "its pod has not restarted since the reboot")
		}
		return d.judgeReady(name, cur, pod)
	case pod.Ready && pod.Since.Before(d.notBefore[name]):
		return d.judgeStale(name)
	case pod.Ready && name == state.Driver && d.driverReplaced(pod, cur) && !d.successorInPlace(pod):
		d.driverUID = string(pod.UID)
		d.leave(name, cur, gpuv1.StatePending, "a new driver pod was loaded")
		return d.because(name, gpuv1.StatePending, "a new driver pod was loaded")
	case pod.Ready && (pod.Current || cur == gpuv1.StateReady):
		// An outdated pod that is ready keeps the state ready: its
		// DaemonSet is replacing it, and the grace period covers the swap.
		return d.judgeReady(name, cur, pod)
	case pod.Ready:
		return d.because(name, gpuv1.StatePending, "its pod runs an older spec and is being replaced")
	}
	// Not ready: a short outage keeps the state ready, as a driver's
	// restart in place does for longer.
	if name == state.Driver {
		if v, handled := d.judgeDriverRestart(cur); handled {
			return v
		}
	}
	if cur == gpuv1.StateReady {
		if left := d.in.Grace - d.now.Sub(pod.Since); left > 0 {
			d.requeue(left)
			return gpuv1.StateReady
		}
		d.leave(name, cur, gpuv1.StatePending, fmt.Sprintf("pod not ready for more than %s%s", d.in.Grace, d.restart(name)))
	}
	return d.because(name, gpuv1.StatePending, "its pod is not ready")
}

// restart asks for a state's own pod to be replaced once it stopped doing
// its job past the grace period: nothing else would restart a pod whose
// readiness or proof was lost (a toolkit whose runtime config was
// reverted configures it again when it starts). Never the driver's: a
// driver pod is replaced by the upgrade state machine alone.
func (d *decision) restart(name state.Name) string {
	if name == state.Driver {
		return ""
	}
	d.result.StalePods = append(d.result.StalePods, name)
	return "; its pod is restarted"
}

// judgeReady decides a state whose pod is ready: ready once the state's
// proof of function holds. A proof lost by a ready state gets the grace
// period, as a pod outage does.
func (d *decision) judgeReady(name state.Name, cur gpuv1.StateValue, pod *state.PodFacts) gpuv1.StateValue {
	if !pod.Current {
		// A ready state's outdated pod, which its DaemonSet is replacing:
		// it proves the old spec (a renamed runtime handler, say), and the
		// swap keeps the state ready, as it did before proofs.
		return gpuv1.StateReady
	}
	why := d.unproven(name)
	if cur == gpuv1.StateReady {
		why = d.stillProven(name)
	}
	if why == "" {
		if name == state.Driver {
			d.driverUID = string(pod.UID)
		}
		delete(d.notBefore, name)
		return gpuv1.StateReady
	}
	if cur != gpuv1.StateReady {
		return d.because(name, gpuv1.StatePending, why)
	}
	if d.withinGrace(name) {
		return gpuv1.StateReady
	}
	d.leave(name, cur, gpuv1.StatePending, fmt.Sprintf("%s, for more than %s%s", why, d.in.Grace, d.restart(name)))
	return d.because(name, gpuv1.StatePending, why)
}

// judgeMissing decides a state whose pod is gone or terminating. A driver
// pod going away means the driver is unloaded, so its dependents restart at
// once; any other pod gets the grace period to come back, as in a rolling
// update.
func (d *decision) judgeMissing(name state.Name, cur gpuv1.StateValue) gpuv1.StateValue {
	if cur != gpuv1.StateReady {
		return d.because(name, gpuv1.StatePending, "no pod yet")
	}
	if name == state.Driver {
		if v, handled := d.judgeDriverRestart(cur); handled {
			return v
		}
		d.leave(name, cur, gpuv1.StatePending, "the driver pod is gone: the driver is being replaced")
		return d.because(name, gpuv1.StatePending, "the driver pod is gone")
	}
	if d.withinGrace(name) {
		return gpuv1.StateReady
	}
	d.leave(name, cur, gpuv1.StatePending, fmt.Sprintf("no pod for more than %s", d.in.Grace))
	return d.because(name, gpuv1.StatePending, "no pod")
}

// withinGrace reports whether a ready state whose pod or proof is missing
// is still within its grace period, counted from when this first went
// missing, and keeps that start for the next decision while it is. Any
// other outcome of a decision ends the count: only the starts recorded
// here are written back.
func (d *decision) withinGrace(name state.Name) bool {
	since, ok := d.missingBefore[name]
	if !ok {
		since = d.now
	}
	left := d.in.Grace - d.now.Sub(since)
	if left <= 0 {
		return false
	}
	d.missing[name] = since
	d.requeue(left)
	return true
}

// judgeStale handles a pod that has been ready since before its state was
// reset, or since before the states it starts after were ready again: it
// has not restarted yet, or it raced them. Past the grace period it is
// deleted so that its DaemonSet starts a fresh one.
func (d *decision) judgeStale(name state.Name) gpuv1.StateValue {
	if left := d.in.Grace - d.now.Sub(d.notBefore[name]); left > 0 {
		d.requeue(left)
	} else {
		d.result.StalePods = append(d.result.StalePods, name)
	}
	return d.because(name, gpuv1.StatePending, msgStalePod)
}

// msgStalePod says why a state waits for its pod to restart.
const msgStalePod = "its pod has not restarted since the state was reset and the states before it were ready"

// staleDriverAccepted decides a driver pod ready since before the node's
// reboot, as far as the API says. A driver pod is never deleted as stale:
// only the upgrade replaces a driver. Within the grace period the kubelet
// is given time to report the restart; past it, the pod is taken as it
// is.
func (d *decision) staleDriverAccepted() bool {
	if left := d.in.Grace - d.now.Sub(d.notBefore[state.Driver]); left > 0 {
		d.requeue(left)
		return false
	}
	d.event(false, "DriverNotRestarted", "the driver pod has been ready since before the reset of %s: "+
		"taken as ready, since a driver pod is replaced only by an upgrade", d.notBefore[state.Driver].Format(time.RFC3339))
	return true
}

// cannotRun says why a state cannot run on the node whatever its pod does,
// or "" when it can.
func (d *decision) cannotRun(name state.Name) string {
	switch name {
	case state.Driver:
		if _, ok := state.OSReleaseOf(d.in.Node.Labels); d.in.DriverNeedsOS && !ok {
			return fmt.Sprintf("no driver image for this node: its OS is unknown (labels %s and %s are missing; is NFD running?)",
				state.LabelOSReleaseID, state.LabelOSVersionID)
		}
		if d.in.DriverImageMissing && d.noDriverUntilImage() {
			return d.in.DriverAwaitsImage
		}
	case state.DRADriver:
		return d.draUnavailable()
	case state.ContainerToolkit:
		if r := d.variant.Runtime; !state.SupportedRuntime(r) {
			return fmt.Sprintf("the node's container runtime is %s (%s), which the container toolkit cannot configure here: "+
				"run containerd or CRI-O on GPU nodes", r, d.in.Node.Status.NodeInfo.ContainerRuntimeVersion)
		}
	}
	return ""
}

// noDriverUntilImage reports whether no driver pod is on the node while
// its kernel's precompiled image is not found: none may start until it
// is, or the one of the kernel it ran is kept as it is. A node that runs
// one keeps it, and its state says what that pod does.
func (d *decision) noDriverUntilImage() bool {
	return d.in.DriverAwaitsImage != "" && d.in.Pods[state.Driver] == nil
}

// because records why a state is not ready and returns its value.
func (d *decision) because(name state.Name, v gpuv1.StateValue, why string) gpuv1.StateValue {
	d.result.Why[name] = why
	return v
}

// driverRestarting reports whether the node's driver upgrade, or the
// repair of its GPUs, is at the step that replaces the driver pod. A node
// on its host's driver has no driver pod to replace, whatever its stale
// label says.
func (d *decision) driverRestarting() bool {
	return d.driverUpgrading() ||
		(d.variant.DriverRoot == gpuv1.DriverRootContainer &&
			remediation.ReloadsDriver(gpuv1.RemediationState(d.in.Node.Labels[gpuv1.LabelRemediationState])))
}

// driverUpgrading reports whether the node's driver upgrade replaces the
// driver pod now: the only time its pool may change, since a new pool's
// driver is a new driver.
func (d *decision) driverUpgrading() bool {
	return d.variant.DriverRoot == gpuv1.DriverRootContainer &&
		gpuv1.UpgradeState(d.in.Node.Labels[gpuv1.LabelUpgradeState]) == gpuv1.UpgradePodRestart
}

// driverReplaced reports whether a ready driver pod is not the one last
// judged ready while the state still says ready: a new driver was loaded
// without the operator seeing the old pod go.
func (d *decision) driverReplaced(pod *state.PodFacts, cur gpuv1.StateValue) bool {
	return cur == gpuv1.StateReady && d.driverUID != "" && string(pod.UID) != d.driverUID
}
