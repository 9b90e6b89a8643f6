package gating

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Annotations of the node's allocation mode.
const (
	// AnnotationAllocationMode is the allocation mode the operator last
	// wrote on the node's gpuv1.LabelAllocationMode. The label gates the
	// device plugin's and the DRA driver's DaemonSets, so a person's edit
	// of it is not taken as the node's mode: the operator writes its own
	// back, and a pool's mode is changed in the policy.
	AnnotationAllocationMode = gpuv1.OperatorAnnotationPrefix + "allocation-mode"
	// AnnotationGPUCount is the number of GPUs GPU feature discovery last
	// counted on the node (its nvidia.com/gpu.count label), kept when the
	// label goes with GFD: the DRA driver's ResourceSlices must name as
	// many.
	AnnotationGPUCount = gpuv1.OperatorAnnotationPrefix + "gpu-count"
	// AnnotationAllocationModeWaiting says why the node is not in its
	// pool's allocation mode; absent when it is.
	AnnotationAllocationModeWaiting = gpuv1.OperatorAnnotationPrefix + "allocation-mode-waiting"
)

// GFD's count of the node's GPUs, and the MIG strategy it counted them
// under.
const (
	labelGPUCount    = "nvidia.com/gpu.count"
	labelMIGStrategy = "nvidia.com/mig.strategy"
)

// allocationMode decides the node's allocation mode, which the device
// plugin's and the DRA driver's DaemonSets are gated on: never both on one
// node, since the kubelet would hand a GPU out twice. A node moves to its
// pool's mode at once when it has nothing to lose: a new node, or one
// whose GPU stack never served (gpuv1.AnnotationServed) and runs neither
// plugin. A node from before allocation modes keeps its device plugin. A
// node that serves GPUs keeps its mode until a switch moves it, with its
// GPU pods evicted first; it says so meanwhile.
func (d *decision) allocationMode() gpuv1.AllocationMode {
	cur := knownMode(d.in.Node.Annotations[AnnotationAllocationMode]) // "" when not the operator's writing
	want := d.in.AllocationMode
	mode := cur
	hold := knownMode(d.in.Node.Annotations[gpuv1.AnnotationModeSwitchHold])
	if from := cmp.Or(cur, gpuv1.AllocationDevicePlugin); hold != from && hold != gpuv1.AllocationNone && from != gpuv1.AllocationNone {
		hold = "" // from one plugin's mode to the other's: only ever through none (a person's edit)
	}
	switch {
	case hold != "":
		// The switch holds the node's mode: none while one plugin
		// leaves, then the mode it moves the node to.
		mode = hold
	case cur == gpuv1.AllocationNone:
		// A switch's none whose hold is gone (its marks forgotten, or a
		// person's edit): it stays until nothing of a plugin is left,
		// then takes the pool's mode, or the device plugin's where that
		// cannot run.
		if d.in.Pods[state.DevicePlugin] == nil && d.in.Pods[state.DRADriver] == nil && (d.in.DRA == nil || d.in.DRA.Slices == 0) {
			mode = cmp.Or(want, gpuv1.AllocationDevicePlugin)
			if mode == gpuv1.AllocationDRA && d.draUnavailable() != "" {
				mode = gpuv1.AllocationDevicePlugin
			}
		}
	case want == "" && cur == "":
		// Held by no pool and never labelled: as before modes.
		mode = gpuv1.AllocationDevicePlugin
	case want == "" || cur == want:
	case d.nothingToLose():
		mode = want
	case cur == "":
		mode = gpuv1.AllocationDevicePlugin
	}
	if want != "" && mode != want && hold == "" {
		d.modeWaits = fmt.Sprintf("its pool's allocation mode is %s%s, but the node serves GPUs in mode %s: "+
			"it waits for its allocation mode switch, which moves it once its GPU pods are evicted", want, d.setBy(), mode)
	}
	d.result.Labels[gpuv1.LabelAllocationMode] = string(mode)
	d.result.Annotations[AnnotationAllocationMode] = string(mode)
	return mode
}

// setBy names the GPUCluster that set the pool's mode, if one did.
func (d *decision) setBy() string {
	if d.in.GPUCluster == "" {
		return ""
	}
	return " (set by GPUCluster " + d.in.GPUCluster + ")"
}

// knownMode is an allocation mode a node's label may carry; "" for any
// other value.
func knownMode(v string) gpuv1.AllocationMode {
	switch m := gpuv1.AllocationMode(v); m {
	case gpuv1.AllocationDevicePlugin, gpuv1.AllocationDRA, gpuv1.AllocationNone:
		return m
	}
	return ""
}

// nothingToLose reports whether no plugin serves, or may serve, the node's
// GPUs: its GPU stack never served (gpuv1.AnnotationServed), neither
// plugin's pod runs there, and neither has left GPUs behind, allocatable
// or in ResourceSlices, as a plugin whose pod is terminating does.
func (d *decision) nothingToLose() bool {
	return !d.served() && d.in.Pods[state.DevicePlugin] == nil && d.in.Pods[state.DRADriver] == nil &&
		!advertises(d.in.Node.Status.Capacity) && (d.in.DRA == nil || d.in.DRA.Slices == 0)
}

// AllocationModeOf is the node's allocation mode as its label says: an
// unlabelled node serves through the device plugin, as before modes.
func AllocationModeOf(n *corev1.Node) gpuv1.AllocationMode {
	if m := gpuv1.AllocationMode(n.Labels[gpuv1.LabelAllocationMode]); m != "" {
		return m
	}
	return gpuv1.AllocationDevicePlugin
}

// offMode reports whether a state runs in another allocation mode than
// the node's: the device plugin and the MPS daemon off DRA nodes, the DRA
// driver off the others.
func (d *decision) offMode(name state.Name) bool {
	s, _ := d.in.Graph.Get(name)
	return s.Mode != "" && s.Mode != d.mode
}

// draUnavailable says why the DRA driver cannot run on any node: the API
// server does not serve ResourceSlices, or CDI is off (the driver hands
// GPUs to containers through CDI specs alone). The API server refuses the
// latter in a ClusterPolicy's own pools, not in an NVIDIADriver's.
func (d *decision) draUnavailable() string { return DRARefusal(d.in.Policy, d.in.DRAServed) }

// DRARefusal says why the DRA driver cannot run on any node under the
// policy; served says whether the API server serves resource.k8s.io/v1
// ResourceSlices. "" when it can.
func DRARefusal(cp *gpuv1.ClusterPolicy, served bool) string {
	switch {
	case !served:
		return "the API server does not serve resource.k8s.io/v1 ResourceSlices: allocation mode dra needs Kubernetes 1.34 " +
			"or later (restart the operator once the cluster serves them; or set the pool's allocationMode to device-plugin, " +
			"and delete the GPUCluster, where one puts every pool in dra)"
	case !cp.Spec.CDI.IsEnabled():
		return "allocation mode dra needs CDI: set the ClusterPolicy's cdi.enabled to true, or the pool's allocationMode to " +
			"device-plugin (and delete the GPUCluster, where one puts every pool in dra)"
	}
	return ""
}

// draUnproven says why the DRA driver's plugin, whose pod is ready, does
// not hand out the node's GPUs yet, from the ResourceSlices it publishes:
// its pod has no readiness probe, so only the slices prove it. The slices
// must be complete and name a GPU. On a node that never served, they must
// name every GPU GFD counted there, when it did; after that, fewer GPUs is
// a health matter, as for the device plugin's capacity, and must not keep
// a node whose GPU fell off the bus from ever coming back (after a reboot
// its slices name one GPU fewer than the count it had). A ready state only
// needs a GPU named (still).
func (d *decision) draUnproven(still bool) string {
	n := d.in.DRA
	switch {
	case n == nil || len(n.Pools) == 0:
		return "the DRA driver runs, but the node has no ResourceSlice of driver gpu.nvidia.com"
	case still && n.GPUs > 0:
		return ""
	case !n.Complete():
		return "the DRA driver runs, but its ResourceSlices are incomplete: " + n.Incomplete()
	case n.GPUs == 0:
		return "the DRA driver runs, but its ResourceSlices name no GPU"
	}
	if count := d.gpuCount(); count > 0 && !d.served() && n.GPUs != count && !still {
		return fmt.Sprintf("the DRA driver's ResourceSlices name %d GPUs, but the node has %d (GPU feature discovery's %s)",
			n.GPUs, count, labelGPUCount)
	}
	return ""
}

// gpuCount is the node's number of GPUs as GFD last counted them; 0 when
// not known yet, or when GFD counts MIG devices instead (mig.strategy
// single on a GPU in MIG mode; its nvidia.com/mig.strategy label says so).
func (d *decision) gpuCount() int {
	if d.in.Node.Labels[labelMIGStrategy] == string(gpuv1.MIGStrategySingle) && d.in.Node.Labels[gpuv1.LabelMIGCapable] == gpuv1.LabelTrue {
		return 0
	}
	if GFDCountsMIGDevices(d.in.Node.Labels) {
		return 0
	}
	for _, v := range []string{d.in.Node.Labels[labelGPUCount], d.in.Node.Annotations[AnnotationGPUCount]} {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// GFDCountsMIGDevices reports whether GPU feature discovery labels MIG
// devices by profile on the node (nvidia.com/mig-<profile>.count, the
// mixed strategy): its nvidia.com/gpu.count then need not count the GPUs
// those are cut from, so it is not read as the node's GPU count.
func GFDCountsMIGDevices(labels map[string]string) bool {
	for k, v := range labels {
		if strings.HasPrefix(k, "nvidia.com/mig-") && strings.HasSuffix(k, ".count") && v != "" && v != "0" {
			return true
		}
	}
	return false
}
