package gating

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// IsGPUNode reports whether the node is a GPU node: NFD finds an NVIDIA PCI
// device, or nvidia.com/gpu.present=true says so, a user's or the
// operator's. Any other value a user gives nvidia.com/gpu.present keeps
// the operator off the node. The operator's own nvidia.com/gpu.present=true,
// written because NFD found a device, outlives NFD's labels for
// Input.NFDGrace, after which Decide takes it off: until then every
// controller holds the node as a GPU node, and no operation in flight
// there ends because nfd-master restarted.
func IsGPUNode(n metav1.Object) bool {
	labels := n.GetLabels()
	if v, ok := labels[gpuv1.LabelGPUPresent]; ok {
		return v == gpuv1.LabelTrue
	}
	return nfdFound(labels)
}

// nfdLost reports, for a GPU node the operator found by NFD's labels,
// since when they have been gone; zero while they are there, or for a node
// a user labelled.
func nfdLost(n *corev1.Node, now time.Time) time.Time {
	if nfdFound(n.Labels) || n.Annotations[AnnotationFoundBy] != foundByNFD {
		return time.Time{}
	}
	if t, err := time.Parse(time.RFC3339, n.Annotations[AnnotationNFDLostSince]); err == nil {
		return t
	}
	return now
}

func nfdFound(labels map[string]string) bool {
	for _, l := range nfdGPULabels {
		if labels[l] == gpuv1.LabelTrue {
			return true
		}
	}
	return false
}

// How a GPU node was found, in AnnotationFoundBy.
const (
	foundByNFD   = "nfd"
	foundByLabel = "label"
)

// decision carries the working state of one Decide call.
type decision struct {
	in        Input
	now       time.Time
	result    Result
	values    map[state.Name]gpuv1.StateValue // decided so far, in graph order
	current   map[state.Name]gpuv1.StateValue // as the node's labels say
	notBefore timeMap
	// missingBefore is when each ready state's pod or proof went missing,
	// as the node's annotation says; missing is what this decision keeps
	// of it (see withinGrace).
	missingBefore timeMap
	missing       timeMap
	driverUID     string
	// restartBefore is the driver's restart in place as the node's
	// annotation says; restarting is what this decision keeps of it.
	restartBefore, restarting inPlaceRestart
	// variant is the node's driver root and runtime, as decided.
	variant state.Variant
	// migConfig is the node's MIG configuration, "" for none.
	migConfig string
	// hostDriver says what was found of a driver on the host; "" if none.
	hostDriver string
	// booted is when this decision found that the node rebooted; zero
	// otherwise.
	booted time.Time
	// mode is the node's allocation mode, as decided; modeWaits says why
	// it is not its pool's, "" when it is.
	mode      gpuv1.AllocationMode
	modeWaits string
	// wasReady is true when every state was ready or disabled before this
	// decision, as the node's labels said.
	wasReady bool
}

// Decide returns the labels and annotations the operator wants on the node.
func Decide(in Input) Result {
	if in.Policy == nil || in.Node == nil || !IsGPUNode(in.Node) {
		return Result{}
	}
	now := in.Now.UTC().Truncate(time.Second)
	lost := nfdLost(in.Node, now)
	if !lost.IsZero() && now.Sub(lost) >= in.NFDGrace {
		// NFD's labels stayed gone past the grace: no GPU node any more.
		return Result{}
	}
	d := &decision{
		in:            in,
		now:           now,
		result:        Result{Labels: map[string]string{}, Annotations: map[string]string{}, Why: map[state.Name]string{}},
		values:        map[state.Name]gpuv1.StateValue{},
		current:       map[state.Name]gpuv1.StateValue{},
		notBefore:     parseTimeMap(in.Node.Annotations[AnnotationNotBefore]),
		missingBefore: parseTimeMap(in.Node.Annotations[AnnotationMissingSince]),
		missing:       timeMap{},
		driverUID:     in.Node.Annotations[AnnotationDriverPod],
		restartBefore: parseInPlaceRestart(in.Node.Annotations[AnnotationDriverRestart]),
	}
	d.result.Labels[gpuv1.LabelGPUPresent] = gpuv1.LabelTrue
	d.result.Annotations[AnnotationFoundBy] = foundByLabel
	switch {
	case nfdFound(in.Node.Labels):
		d.result.Annotations[AnnotationFoundBy] = foundByNFD
	case !lost.IsZero():
		d.holdAfterNFDLoss(lost)
	}
	d.deployLabels()
	d.mode = d.allocationMode()
	d.migConfig = d.decideMIGConfig()
	d.decideVariant()
	pool := d.driverPool()
	setIfNonEmpty(d.result.Labels, gpuv1.LabelDriverPool, pool)
	if in.DriverPoolsFromNVIDIADrivers {
		// NVIDIA's owner label: the NVIDIADriver the node's driver is of.
		setIfNonEmpty(d.result.Labels, gpuv1.LabelDriverOwner, pool)
	}
	setIfNonEmpty(d.result.Labels, gpuv1.LabelDriverKernel, d.driverKernel(pool))
	wasReady := d.readCurrent()
	d.wasReady = wasReady
	d.detectReboot()
	d.resetOnVariantChange()
	for _, name := range in.Graph.PerNode() {
		d.startAfterPrerequisites(name)
		d.values[name] = d.judge(name)
		if name == state.CUDAWorkload {
			d.workloadLeftBehind()
		}
		d.result.Labels[gpuv1.StateLabel(string(name))] = string(d.values[name])
	}
	d.driverVersion()
	if d.modeWaits != "" {
		d.tellAs("AllocationModeWaiting", AnnotationAllocationModeWaiting, "%s", d.modeWaits)
	}
	d.health()
	d.bookkeeping()
	if !wasReady && d.allReady() {
		d.becameReady()
	}
	if in.Policy.Spec.Operator.ReadinessTaint.Enabled && !d.allReady() {
		d.result.ReadinessTaint = true
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
		if (has && (v == gpuv1.LabelTrue || v == gpuv1.DeployPausedForMIG)) || (!has && d.in.Enabled[name] && !optedOut) {
			d.result.Labels[key] = gpuv1.LabelTrue
		}
	}
}

// readCurrent reads each state's value from the node's labels and reports
// whether every state was ready or disabled already.
func (d *decision) readCurrent() bool {
	ready := true
	for _, name := range d.in.Graph.PerNode() {
		v := d.in.Graph.ValueOf(name, d.in.Node.Labels)
		d.current[name] = v
		ready = ready && v.Up()
	}
	return ready
}

// disabled reports whether the state does not run on this node: disabled in
// the policy, opted out by a deploy label, off in the node's allocation
// mode, or, for the driver, found on the host.
func (d *decision) disabled(name state.Name) bool {
	if name == state.Driver && d.variant.DriverRoot == gpuv1.DriverRootHost {
		return true
	}
	if d.offMode(name) {
		return true
	}
	if name == state.MPSControlDaemon && (!d.runsMPS() || d.disabled(state.DevicePlugin)) {
		return true
	}
	if name == state.MIGManager && d.migByDRADriver() {
		return true
	}
	if name == state.CUDAWorkload && d.disabled(state.DevicePlugin) && d.disabled(state.DRADriver) {
		// Its GPU comes from the device plugin or the DRA driver: on a
		// node of allocation mode none, or one opted out of both, there
		// is no path to prove.
		return true
	}
	if name == state.DCGMExporter && d.in.Enabled[state.DCGM] && d.optedOut(state.DCGM) {
		// Where the standalone host engine runs, every exporter reads its
		// node's through the node-local Service: on a node opted out of
		// the engine it would find none.
		return true
	}
	return d.optedOut(name)
}

// optedOut reports whether the policy or the node's labels keep the state
// off the node.
func (d *decision) optedOut(name state.Name) bool {
	return !d.in.Enabled[name] || OptedOut(d.in.Node.Labels, name)
}

// OptedOut reports whether a node's labels keep a state off it: every
// operand opted out (nvidia.com/gpu.deploy.operands=false), or the state's
// deploy label set to a value other than true or NVIDIA's
// paused-for-mig-change. An absent label is no opt-out: the node
// controller writes it, and a person who deletes it has said nothing. The
// maintenance machines read the same rule: only an opt-out ends an
// operation in flight.
func OptedOut(labels map[string]string, name state.Name) bool {
	if labels[gpuv1.LabelDeployOperands] == "false" {
		return true
	}
	v, has := labels[gpuv1.DeployLabel(string(name))]
	return has && v != gpuv1.LabelTrue && v != gpuv1.DeployPausedForMIG
}

// driverVersion labels the node with the driver version ready on it.
func (d *decision) driverVersion() {
	if d.values[state.Driver] != gpuv1.StateReady {
		return
	}
	if pod := d.in.Pods[state.Driver]; pod != nil {
		setIfNonEmpty(d.result.Labels, gpuv1.LabelDriverVersion, pod.Annotation(driver.AnnotationVersion))
	}
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
	setIfNonEmpty(a, AnnotationDriverRestart, d.restarting.String())
	discovered := d.in.Node.Annotations[AnnotationDiscoveredAt]
	if _, err := time.Parse(time.RFC3339, discovered); err != nil {
		discovered = d.now.Format(time.RFC3339)
	}
	a[AnnotationDiscoveredAt] = discovered
	if d.served() {
		a[gpuv1.AnnotationServed] = gpuv1.LabelTrue
	}
	if n := d.gpuCount(); n > 0 && d.mode == gpuv1.AllocationDRA {
		// Only the DRA driver's proof reads it.
		a[AnnotationGPUCount] = strconv.Itoa(n)
	}
	if !d.booted.IsZero() {
		a[AnnotationBootedAt] = d.booted.Format(time.RFC3339)
	} else {
		setIfNonEmpty(a, AnnotationBootedAt, d.in.Node.Annotations[AnnotationBootedAt])
	}
}

func (d *decision) allReady() bool {
	for _, v := range d.values {
		if v != gpuv1.StateReady && v != gpuv1.StateDisabled {
			return false
		}
	}
	return true
}

// becameReady measures how long the node took to become ready, from its
// discovery or, after a reboot, from when it came back.
func (d *decision) becameReady() {
	d.result.BecameReady = true
	var since time.Time
	for _, key := range []string{AnnotationDiscoveredAt, AnnotationBootedAt} {
		if t, err := time.Parse(time.RFC3339, d.result.Annotations[key]); err == nil && t.After(since) {
			since = t
		}
	}
	if !since.IsZero() {
		d.result.ReadyAfter = d.now.Sub(since)
	}
	d.event(false, "GPUStackReady", "every state is ready or disabled: %s", joinNames(d.in.Graph.PerNode()))
}

// holdAfterNFDLoss keeps a GPU node whose NFD labels went one until the
// grace has passed since they did: its labels, and so its DaemonSets' pods
// and every operation in flight, stay as they are.
func (d *decision) holdAfterNFDLoss(since time.Time) {
	d.result.Annotations[AnnotationFoundBy] = foundByNFD
	d.result.Annotations[AnnotationNFDLostSince] = since.Format(time.RFC3339)
	d.requeue(since.Add(d.in.NFDGrace).Sub(d.now))
	if d.in.Node.Annotations[AnnotationNFDLostSince] == "" {
		d.event(true, "NFDLabelsLost", "NFD's labels of an NVIDIA GPU are gone: the node stays a GPU node for %s, in case they come back "+
			"(an nfd-master restart), then the operator leaves it", d.in.NFDGrace)
	}
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
