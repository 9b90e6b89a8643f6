package gating

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// nfdGPULabels are the labels NFD sets on a node with an NVIDIA PCI device
// (vendor 10de), with or without the display/3D class in the name.
var nfdGPULabels = []string{
	"feature.node.kubernetes.io/pci-10de.present",
	"feature.node.kubernetes.io/pci-0302_10de.present",
	"feature.node.kubernetes.io/pci-0300_10de.present",
}

// Input is what Decide judges one node from.
type Input struct {
	Graph *state.Graph
	Node  *corev1.Node
	// Policy is the active ClusterPolicy; nil when there is none, in which
	// case every label the operator set is to be removed.
	Policy *gpuv1.ClusterPolicy
	// Enabled says which states the policy deploys.
	Enabled map[state.Name]bool
	// Pods holds each state's pod on the node; nil or absent when none.
	Pods map[state.Name]*state.PodFacts
	// DriverPool is the node's driver pool under the policy.
	DriverPool string
	// DriverNeedsOS is true when the pool's driver image tag names the OS
	// (a version rather than a digest): a node whose OS NFD has not
	// labelled gets no driver DaemonSet.
	DriverNeedsOS bool
	Grace         time.Duration
	Now           time.Time
}

// Event is something worth telling a person about the node.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Result is what the operator wants on the node.
type Result struct {
	// Labels is every label the operator wants on the node. Applied with
	// server-side apply, labels the operator set before and that are not
	// here are removed; labels of users are never touched.
	Labels map[string]string
	// Annotations is every bookkeeping annotation the operator wants.
	Annotations map[string]string
	// Events to record once the labels are written.
	Events []Event
	// StalePods are states whose pod has been ready since before the state
	// was reset and did not restart within the grace period; deleting the
	// pod makes the DaemonSet controller start a fresh one.
	StalePods []state.Name
	// RequeueAfter is when a grace period ends; zero when none runs.
	RequeueAfter time.Duration
	// BecameReady is true when every state turned ready or disabled in this
	// decision; ReadyAfter is then how long since discovery it took.
	BecameReady bool
	ReadyAfter  time.Duration
}

// IsGPUNode reports whether the node is a GPU node: NFD found an NVIDIA PCI
// device, or a user set nvidia.com/gpu.present=true. Any other value a user
// gives nvidia.com/gpu.present keeps the operator off the node.
func IsGPUNode(labels map[string]string) bool {
	if v, ok := labels[gpuv1.LabelGPUPresent]; ok {
		return v == gpuv1.LabelTrue
	}
	for _, l := range nfdGPULabels {
		if labels[l] == gpuv1.LabelTrue {
			return true
		}
	}
	return false
}

// decision carries the working state of one Decide call.
type decision struct {
	in        Input
	now       time.Time
	result    Result
	values    map[state.Name]gpuv1.StateValue // decided so far, in graph order
	current   map[state.Name]gpuv1.StateValue // as the node's labels say
	notBefore timeMap
	missing   timeMap
	driverUID string
}

// Decide returns the labels and annotations the operator wants on the node.
func Decide(in Input) Result {
	if in.Policy == nil || in.Node == nil || !IsGPUNode(in.Node.Labels) {
		return Result{}
	}
	d := &decision{
		in:        in,
		now:       in.Now.UTC().Truncate(time.Second),
		result:    Result{Labels: map[string]string{}, Annotations: map[string]string{}},
		values:    map[state.Name]gpuv1.StateValue{},
		current:   map[state.Name]gpuv1.StateValue{},
		notBefore: parseTimeMap(in.Node.Annotations[AnnotationNotBefore]),
		missing:   parseTimeMap(in.Node.Annotations[AnnotationMissingSince]),
		driverUID: in.Node.Annotations[AnnotationDriverPod],
	}
	d.result.Labels[gpuv1.LabelGPUPresent] = gpuv1.LabelTrue
	setIfNonEmpty(d.result.Labels, gpuv1.LabelDriverPool, in.DriverPool)
	d.deployLabels()
	wasReady := d.readCurrent()
	d.detectReboot()
	for _, name := range in.Graph.PerNode() {
		d.values[name] = d.judge(name)
		d.result.Labels[gpuv1.StateLabel(string(name))] = string(d.values[name])
	}
	d.driverVersion()
	d.bookkeeping()
	if !wasReady && d.allReady() {
		d.becameReady()
	}
	return d.result
}

// deployLabels sets nvidia.com/gpu.deploy.<operand>=true where it is absent
// and the operand is enabled, and keeps "true" where it is already set. A
// user's other value is left alone, and so is a node opted out of operands.
func (d *decision) deployLabels() {
	labels := d.in.Node.Labels
	optedOut := labels[gpuv1.LabelDeployOperands] == "false"
	for _, name := range d.in.Graph.PerNode() {
		key := gpuv1.DeployLabel(string(name))
		v, has := labels[key]
		if (has && v == gpuv1.LabelTrue) || (!has && d.in.Enabled[name] && !optedOut) {
			d.result.Labels[key] = gpuv1.LabelTrue
		}
	}
}

// readCurrent reads each state's value from the node's labels and reports
// whether every state was ready or disabled already.
func (d *decision) readCurrent() bool {
	ready := true
	for _, name := range d.in.Graph.PerNode() {
		v := gpuv1.StateValue(d.in.Node.Labels[gpuv1.StateLabel(string(name))])
		if v == "" {
			v = gpuv1.StatePending
		}
		d.current[name] = v
		ready = ready && (v == gpuv1.StateReady || v == gpuv1.StateDisabled)
	}
	return ready
}

// detectReboot resets every state from the driver down when the node's boot
// ID changed: after a reboot nothing runs until it starts again, in order.
func (d *decision) detectReboot() {
	bootID := d.in.Node.Status.NodeInfo.BootID
	last := d.in.Node.Annotations[AnnotationBootID]
	setIfNonEmpty(d.result.Annotations, AnnotationBootID, bootID)
	if last == "" || bootID == "" || last == bootID {
		return
	}
	for _, name := range d.in.Graph.PerNode() {
		if d.current[name] != gpuv1.StateDisabled {
			d.current[name] = gpuv1.StatePending
			d.notBefore[name] = d.now
		}
	}
	d.missing = timeMap{}
	d.event(false, "NodeRebooted", "boot ID changed from %s to %s: every state restarts in order from the driver down", last, bootID)
}

// judge decides one state's value on the node, given the values of the
// states before it.
func (d *decision) judge(name state.Name) gpuv1.StateValue {
	if d.disabled(name) {
		delete(d.notBefore, name)
		delete(d.missing, name)
		return gpuv1.StateDisabled
	}
	if d.driverRestarting() && (name == state.Driver || slices.Contains(d.in.Graph.Downstream(state.Driver), name)) {
		// The driver pod is about to be replaced: with the driver no longer
		// ready, everything after it leaves the node first, and starts again
		// in order once the new driver is ready.
		delete(d.missing, name)
		if name != state.Driver {
			d.notBefore[name] = d.now
		}
		return gpuv1.StateUpgrading
	}
	cur := d.current[name]
	if name == state.Driver && d.in.DriverNeedsOS {
		if _, ok := state.OSReleaseOf(d.in.Node.Labels); !ok {
			if cur != gpuv1.StateFailed {
				d.leave(name, cur, gpuv1.StateFailed, fmt.Sprintf("no driver image for this node: its OS is unknown (labels %s and %s are missing; is NFD running?)",
					state.LabelOSReleaseID, state.LabelOSVersionID))
			}
			return gpuv1.StateFailed
		}
	}
	for _, p := range d.in.Graph.Prerequisites(name) {
		if v := d.values[p]; v != gpuv1.StateReady && v != gpuv1.StateDisabled {
			delete(d.missing, name)
			return gpuv1.StatePending
		}
	}
	pod := d.in.Pods[name]
	if pod == nil {
		return d.judgeMissing(name, cur)
	}
	delete(d.missing, name)
	switch {
	case pod.Failure != "":
		if cur != gpuv1.StateFailed {
			d.leave(name, cur, gpuv1.StateFailed, pod.Failure)
		}
		return gpuv1.StateFailed
	case pod.Ready && pod.Since.Before(d.notBefore[name]):
		return d.judgeStale(name)
	case pod.Ready && name == state.Driver && d.driverReplaced(pod, cur):
		d.driverUID = string(pod.UID)
		d.leave(name, cur, gpuv1.StatePending, "a new driver pod was loaded")
		return gpuv1.StatePending
	case pod.Ready && (pod.Current || cur == gpuv1.StateReady):
		// An outdated pod that is ready keeps the state ready: its
		// DaemonSet is replacing it, and the grace period covers the swap.
		if name == state.Driver {
			d.driverUID = string(pod.UID)
		}
		delete(d.notBefore, name)
		return gpuv1.StateReady
	case pod.Ready:
		return gpuv1.StatePending // waiting for the DaemonSet to roll the pod
	}
	// Not ready: a short outage keeps the state ready.
	if cur == gpuv1.StateReady {
		if left := d.in.Grace - d.now.Sub(pod.Since); left > 0 {
			d.requeue(left)
			return gpuv1.StateReady
		}
		d.leave(name, cur, gpuv1.StatePending, fmt.Sprintf("pod not ready for more than %s", d.in.Grace))
	}
	return gpuv1.StatePending
}

// judgeMissing decides a state whose pod is gone or terminating. A driver
// pod going away means the driver is unloaded, so its dependents restart at
// once; any other pod gets the grace period to come back, as in a rolling
// update.
func (d *decision) judgeMissing(name state.Name, cur gpuv1.StateValue) gpuv1.StateValue {
	if cur != gpuv1.StateReady {
		delete(d.missing, name)
		return gpuv1.StatePending
	}
	if name == state.Driver {
		d.leave(name, cur, gpuv1.StatePending, "the driver pod is gone: the driver is being replaced")
		return gpuv1.StatePending
	}
	since := d.missing.setIfAbsent(name, d.now)
	if left := d.in.Grace - d.now.Sub(since); left > 0 {
		d.requeue(left)
		return gpuv1.StateReady
	}
	delete(d.missing, name)
	d.leave(name, cur, gpuv1.StatePending, fmt.Sprintf("no pod for more than %s", d.in.Grace))
	return gpuv1.StatePending
}

// judgeStale handles a pod that has been ready since before its state was
// reset: it has not restarted yet. Past the grace period it is deleted so
// that its DaemonSet starts a fresh one.
func (d *decision) judgeStale(name state.Name) gpuv1.StateValue {
	if left := d.in.Grace - d.now.Sub(d.notBefore[name]); left > 0 {
		d.requeue(left)
	} else {
		d.result.StalePods = append(d.result.StalePods, name)
	}
	return gpuv1.StatePending
}

// driverRestarting reports whether the node's driver upgrade is at the
// step that replaces the driver pod.
func (d *decision) driverRestarting() bool {
	return gpuv1.UpgradeState(d.in.Node.Labels[gpuv1.LabelUpgradeState]) == gpuv1.UpgradePodRestart
}

// driverVersion labels the node with the driver version ready on it.
func (d *decision) driverVersion() {
	if d.values[state.Driver] != gpuv1.StateReady {
		return
	}
	if pod := d.in.Pods[state.Driver]; pod != nil {
		setIfNonEmpty(d.result.Labels, gpuv1.LabelDriverVersion, pod.Annotations[driver.AnnotationVersion])
	}
}

// driverReplaced reports whether a ready driver pod is not the one last
// judged ready while the state still says ready: a new driver was loaded
// without the operator seeing the old pod go.
func (d *decision) driverReplaced(pod *state.PodFacts, cur gpuv1.StateValue) bool {
	return cur == gpuv1.StateReady && d.driverUID != "" && string(pod.UID) != d.driverUID
}

// disabled reports whether the state does not run on this node: disabled in
// the policy, or opted out by a deploy label.
func (d *decision) disabled(name state.Name) bool {
	labels := d.in.Node.Labels
	if !d.in.Enabled[name] || labels[gpuv1.LabelDeployOperands] == "false" {
		return true
	}
	v, has := labels[gpuv1.DeployLabel(string(name))]
	return has && v != gpuv1.LabelTrue
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

func (d *decision) bookkeeping() {
	a := d.result.Annotations
	setIfNonEmpty(a, AnnotationDriverPod, d.driverUID)
	for name := range d.notBefore {
		if d.values[name] == gpuv1.StateReady || d.values[name] == gpuv1.StateDisabled {
			delete(d.notBefore, name)
		}
	}
	setIfNonEmpty(a, AnnotationNotBefore, d.notBefore.String())
	setIfNonEmpty(a, AnnotationMissingSince, d.missing.String())
	discovered := d.in.Node.Annotations[AnnotationDiscoveredAt]
	if _, err := time.Parse(time.RFC3339, discovered); err != nil {
		discovered = d.now.Format(time.RFC3339)
	}
	a[AnnotationDiscoveredAt] = discovered
}

func (d *decision) allReady() bool {
	for _, v := range d.values {
		if v != gpuv1.StateReady && v != gpuv1.StateDisabled {
			return false
		}
	}
	return true
}

func (d *decision) becameReady() {
	d.result.BecameReady = true
	if t, err := time.Parse(time.RFC3339, d.result.Annotations[AnnotationDiscoveredAt]); err == nil {
		d.result.ReadyAfter = d.now.Sub(t)
	}
	d.event(false, "GPUStackReady", "every state is ready or disabled: %s", joinNames(d.in.Graph.PerNode()))
}

func (d *decision) requeue(after time.Duration) {
	if d.result.RequeueAfter == 0 || after < d.result.RequeueAfter {
		d.result.RequeueAfter = after
	}
}

func (d *decision) event(warning bool, reason, format string, args ...any) {
	d.result.Events = append(d.result.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func joinNames(names []state.Name) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
