package gating

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// decideMIGConfig decides the node's MIG configuration and writes it to
// nvidia.com/mig.config, which mig-manager reads, where no person set the
// label: the node's driver pool's migConfig, else, on a node GFD found
// MIG-capable, migManager.config.default. A label that differs from what
// the operator last wrote is a person's, and wins. A pool's configuration
// is not applied where GFD says the GPUs cannot do MIG; before GFD has
// run (a new node) it is, so that the node's GPU stack starts partitioned.
// It returns the node's configuration, "" for none.
func (d *decision) decideMIGConfig() string {
	spec := &d.in.Policy.Spec.MIGManager
	if !spec.Manages() || d.optedOut(state.MIGManager) {
		return ""
	}
	labels, annotations := d.in.Node.Labels, d.in.Node.Annotations
	if cur, ok := labels[gpuv1.LabelMIGConfig]; ok && cur != annotations[gpuv1.AnnotationMIGConfigWritten] {
		return cur
	}
	var want string
	capable := labels[gpuv1.LabelMIGCapable]
	for _, p := range d.in.Policy.Spec.Driver.NodePools {
		if p.Name == d.in.DriverPool && p.MIGConfig != "" && capable != "false" {
			want = p.MIGConfig
		}
	}
	if want == "" && capable == gpuv1.LabelTrue {
		want = spec.Config.Default
	}
	setIfNonEmpty(d.result.Labels, gpuv1.LabelMIGConfig, want)
	setIfNonEmpty(d.result.Annotations, gpuv1.AnnotationMIGConfigWritten, want)
	return want
}

// judgeMIG decides the mig-manager state from the node's reconfiguration,
// which the upgrade controller steps: pending while the device plugin,
// GFD and dcgm-exporter must be off the node (its GPU pods evicted, the
// configuration applied), failed when the reconfiguration failed, ready
// otherwise. A node whose configuration is not applied yet is ready while
// it serves GPUs with the layout it has, until its turn comes within the
// budget and its GPU pods are gone, and pending while it serves none (a
// new node): its GPU stack starts on the new layout. A node with no
// configuration is disabled.
func (d *decision) judgeMIG(cur gpuv1.StateValue) gpuv1.StateValue {
	desired := d.migConfig
	labels, annotations := d.in.Node.Labels, d.in.Node.Annotations
	applied := annotations[gpuv1.AnnotationMIGApplied]
	var v gpuv1.StateValue
	var why string
	switch st := gpuv1.MIGReconfigureState(labels[gpuv1.LabelMIGReconfigureState]); st {
	case gpuv1.MIGClientsOff, gpuv1.MIGApply:
		v, why = gpuv1.StatePending, fmt.Sprintf("MIG configuration %q is being applied (%s)", desired, st)
	case gpuv1.MIGReconfigureFailed:
		v, why = gpuv1.StateFailed, "its MIG reconfiguration failed: "+annotations[gpuv1.AnnotationMIGReason]
	case gpuv1.MIGValidation:
		v = gpuv1.StateReady
		if d.migDevicesLost() {
			v, why = gpuv1.StatePending, fmt.Sprintf("the node rebooted or loaded a new driver while MIG configuration %q was validated: it is applied again", applied)
		}
	default:
		switch {
		case desired == "" && applied == "" && st == "":
			delete(d.notBefore, state.MIGManager)
			return gpuv1.StateDisabled
		case desired != "" && d.migDevicesLost() && annotations[gpuv1.AnnotationMIGRefused] != "":
			v, why = gpuv1.StateFailed, "its MIG devices are gone (a reboot or a driver reload) and its configuration is refused: "+
				annotations[gpuv1.AnnotationMIGRefused]
		case desired != "" && d.migDevicesLost():
			// Before the device plugin starts: it fails on a GPU in MIG
			// mode with no MIG device under the single strategy, and
			// would advertise nothing of them under mixed.
			v, why = gpuv1.StatePending, fmt.Sprintf("MIG devices do not survive a reboot or a driver reload: "+
				"waiting for MIG configuration %q to be applied again", desired)
		case (desired == "" || desired == applied) && st != gpuv1.MIGEviction:
			v = gpuv1.StateReady
		case ServesGPUs(d.in.Node):
			v = gpuv1.StateReady // serving until its GPU pods are gone
		case annotations[gpuv1.AnnotationMIGRefused] != "":
			v, why = gpuv1.StateFailed, "its MIG configuration is refused: "+annotations[gpuv1.AnnotationMIGRefused]
		default:
			v, why = gpuv1.StatePending, fmt.Sprintf("waiting for MIG configuration %q to be applied", desired)
		}
	}
	if v == gpuv1.StateReady {
		delete(d.notBefore, state.MIGManager)
		return v
	}
	if cur == gpuv1.StateReady || (v == gpuv1.StateFailed && cur != gpuv1.StateFailed) {
		d.leave(state.MIGManager, cur, v, why)
	}
	return d.because(state.MIGManager, v, why)
}

// migDevicesLost reports whether the MIG devices of the applied
// configuration were created under another boot or driver than the
// node's now (gpuv1.AnnotationMIGAppliedUnder).
func (d *decision) migDevicesLost() bool {
	under := d.in.Node.Annotations[gpuv1.AnnotationMIGAppliedUnder]
	return under != "" && under != driverGeneration(d.in.Node.Status.NodeInfo.BootID, d.driverUID)
}

// MIGDevicesLost reports, as the node's labels and annotations say,
// whether the MIG devices of its applied configuration are gone: the node
// rebooted, or loaded another driver pod, since they were created.
func MIGDevicesLost(n *corev1.Node) bool {
	under := n.Annotations[gpuv1.AnnotationMIGAppliedUnder]
	return under != "" && under != DriverGeneration(n)
}

// DriverGeneration names the driver the node runs now: its boot ID and
// the driver pod last judged ready ("" on a host's driver), which MIG
// devices last as long as.
func DriverGeneration(n *corev1.Node) string {
	return driverGeneration(n.Status.NodeInfo.BootID, n.Annotations[AnnotationDriverPod])
}

func driverGeneration(bootID, driverPod string) string { return bootID + "/" + driverPod }

// ServesGPUs reports whether a node has GPU capacity to lose: its device
// plugin is ready, or another device plugin (the operator's disabled or
// opted out) makes GPUs allocatable there. A MIG reconfiguration of a
// node that serves none takes nothing from anyone.
func ServesGPUs(n *corev1.Node) bool {
	if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) == gpuv1.StateReady {
		return true
	}
	for _, q := range GPUResources(n.Status.Allocatable) {
		if q > 0 {
			return true
		}
	}
	return false
}
