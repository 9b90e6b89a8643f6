package gating

import (
	"fmt"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// detectReboot resets every state from the driver down when the node's boot
// ID changed: after a reboot nothing runs until it starts again, in order.
func (d *decision) detectReboot() {
	bootID := d.in.Node.Status.NodeInfo.BootID
	last := d.in.Node.Annotations[AnnotationBootID]
	setIfNonEmpty(d.result.Annotations, AnnotationBootID, bootID)
	if last == "" || bootID == "" || last == bootID {
		return
	}
	// The API does not say when the node booted: the kubelet may report
	// it Ready again without its Ready condition ever changing. The reset
	// counts from now; a pod ready since before counts once the kubelet
	// reports it restarted. A reboot noticed late (the operator was down)
	// restarts the pods after the driver once, past the grace period, and
	// never the driver's (judge).
	d.booted = d.now
	for _, name := range d.in.Graph.PerNode() {
		if d.current[name] != gpuv1.StateDisabled {
			d.current[name] = gpuv1.StatePending
			d.notBefore[name] = d.booted
		}
	}
	d.missingBefore, d.restartBefore = timeMap{}, inPlaceRestart{}
	d.event(false, "NodeRebooted", "boot ID changed from %s to %s: every state restarts in order from the driver down", last, bootID)
}

// startAfterPrerequisites makes a state that was reset wait for a pod
// started after the states it starts after, when one of them became ready
// in this decision. The DaemonSet gate starts its pods only then, but a pod
// may be there already: the kubelet restarts every pod of a node in place
// after a reboot, the driver's as the toolkit's, and a DaemonSet controller
// that reads the node only once its prerequisite is ready again never
// removes the pod it should have. Such a pod raced the states before it,
// as the states of other operators race after a reboot: it restarts now,
// as does a pod whose grace period to report its restart is spent; any
// other waits for that grace period (judgeStale). A state never reset
// keeps the pod it has: on its first rollout there is none yet, and a node
// taken over keeps its operands.
func (d *decision) startAfterPrerequisites(name state.Name) {
	reset, ok := d.notBefore[name]
	if !ok {
		return
	}
	if cur := d.current[name]; cur == gpuv1.StateReady || cur == gpuv1.StateDisabled {
		return
	}
	readied := false
	for _, p := range d.in.Graph.StartPrerequisites(name) {
		readied = readied || (d.values[p] == gpuv1.StateReady && d.current[p] != gpuv1.StateReady)
	}
	if !readied {
		return
	}
	// Pods' times have whole seconds: a restart in the second of this
	// decision counts as after it, as it almost always is (the decision
	// comes after the prerequisite's pod was ready).
	d.notBefore[name] = d.now
	pod := d.in.Pods[name]
	if pod != nil && pod.Ready && pod.Since.Before(d.now) && (!pod.Since.Before(reset) || d.now.Sub(reset) >= d.in.Grace) {
		d.result.StalePods = append(d.result.StalePods, name)
	}
}

// leave records a state leaving ready (or failing): every state after it
// restarts, so their pods must become ready again after now.
func (d *decision) leave(name state.Name, from, to gpuv1.StateValue, why string) {
	downstream := d.in.Graph.Downstream(name)
	for _, n := range downstream {
		if d.current[n] != gpuv1.StateDisabled {
			d.notBefore[n] = d.now
		}
	}
	msg := fmt.Sprintf("%s went from %s to %s: %s", name, from, to, why)
	if len(downstream) > 0 {
		msg += "; restarting after it: " + joinNames(downstream)
	}
	d.event(true, reasonFor(to), "%s", msg)
}

func reasonFor(v gpuv1.StateValue) string {
	if v == gpuv1.StateFailed {
		return "StateFailed"
	}
	return "StateReset"
}
