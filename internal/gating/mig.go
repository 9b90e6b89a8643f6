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
	if !spec.Manages() || d.optedOut(state.MIGManager) || d.migByDRADriver() {
		return ""
	}
	labels, annotations := d.in.Node.Labels, d.in.Node.Annotations
	if cur, ok := labels[gpuv1.LabelMIGConfig]; ok && cur != annotations[gpuv1.AnnotationMIGConfigWritten] {
		return cur
	}
	var want string
	capable := labels[gpuv1.LabelMIGCapable]
	for _, p := range d.in.Policy.Spec.Driver.PolicyPools() {
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

// migByDRADriver reports whether the DRA driver manages the node's MIG
// devices: a node in allocation mode dra under a driver with DynamicMIG,
// which partitions the GPUs for claims and destroys at its start the MIG
// devices it did not make (kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046, cmd/gpu-kubelet-plugin/driver.go). mig-manager does not run
// there, and no configuration is written. An apply under way when
// DynamicMIG is turned on finishes first (issue 52, finding 3):
// mig-manager is not taken off a node while it partitions the GPUs. The
// DRA driver, which comes after mig-manager, starts once it has, and
// destroys what it did not make; a reconfiguration before its apply or
// in its validation is let go at once, nothing on the GPUs half done.
func (d *decision) migByDRADriver() bool {
	applying := gpuv1.MIGReconfigureState(d.in.Node.Labels[gpuv1.LabelMIGReconfigureState]) == gpuv1.MIGApply
	return d.mode == gpuv1.AllocationDRA && d.in.DRADynamicMIG && !applying
}

// judgeMIG decides the mig-manager state from the node's reconfiguration,
// which the maintenance controller steps: pending while the device plugin,
// GFD and dcgm-exporter must be off the node (its GPU pods evicted, the
// configuration applied), failed when the reconfiguration failed, ready
// otherwise. A node whose configuration is not applied yet serves GPUs
// with the layout it has until its turn comes within the budget, however
// long an upgrade or a repair takes its device plugin off meanwhile (the
// upgrade's validation waits for the plugin); only a node that never
// served (a new node: gpuv1.AnnotationServed) is pending, so that its GPU
// stack starts on the new layout. A node with no configuration is
// disabled.
func (d *decision) judgeMIG(cur gpuv1.StateValue) gpuv1.StateValue {
	labels, annotations := d.in.Node.Labels, d.in.Node.Annotations
	v, why := MIGGate{
		State:   gpuv1.MIGReconfigureState(labels[gpuv1.LabelMIGReconfigureState]),
		Desired: d.migConfig, Applied: annotations[gpuv1.AnnotationMIGApplied],
		Lost: d.migDevicesLost(), Refused: annotations[gpuv1.AnnotationMIGRefused], Failed: annotations[gpuv1.AnnotationMIGReason],
		EverServed: d.served(), ServingNow: ServesGPUs(d.in.Node),
	}.Value()
	if v == gpuv1.StateReady || v == gpuv1.StateDisabled {
		delete(d.notBefore, state.MIGManager)
		return v
	}
	if cur == gpuv1.StateReady || (v == gpuv1.StateFailed && cur != gpuv1.StateFailed) {
		d.leave(state.MIGManager, cur, v, why)
	}
	return d.because(state.MIGManager, v, why)
}

// MIGGate is what decides a node's mig-manager state, which gates the
// device plugin, GFD and dcgm-exporter there: its reconfiguration as the
// maintenance controller steps it, its configuration, and whether it
// served GPUs. The exhaustive check of the node operations runs it too.
type MIGGate struct {
	State            gpuv1.MIGReconfigureState
	Desired, Applied string
	// Lost: the MIG devices of Applied are gone (a reboot, a new driver).
	Lost bool
	// Refused and Failed say why the configuration is refused, or the
	// reconfiguration failed; "" when it is not.
	Refused, Failed string
	// EverServed: the node's device plugin has been ready there before
	// (gpuv1.AnnotationServed); ServingNow: it is ready now, or another
	// device plugin makes GPUs allocatable.
	EverServed, ServingNow bool
}

// Value is the mig-manager state, and why when it is not ready.
func (g MIGGate) Value() (gpuv1.StateValue, string) {
	switch g.State {
	case gpuv1.MIGClientsOff, gpuv1.MIGApply:
		return gpuv1.StatePending, fmt.Sprintf("MIG configuration %q is being applied (%s)", g.Desired, g.State)
	case gpuv1.MIGReconfigureFailed:
		return gpuv1.StateFailed, "its MIG reconfiguration failed: " + g.Failed
	case gpuv1.MIGValidation:
		if g.Lost {
			return gpuv1.StatePending, fmt.Sprintf("the node rebooted or loaded a new driver while MIG configuration %q was validated: it is applied again", g.Applied)
		}
		return gpuv1.StateReady, ""
	}
	switch {
	case g.Desired == "" && g.Applied == "" && g.State == "":
		return gpuv1.StateDisabled, ""
	case g.Desired != "" && g.Lost && g.Refused != "":
		return gpuv1.StateFailed, "its MIG devices are gone (a reboot or a driver reload) and its configuration is refused: " + g.Refused
	case g.Desired != "" && g.Lost:
		// Before the device plugin starts: it fails on a GPU in MIG mode
		// with no MIG device under the single strategy, and would
		// advertise nothing of them under mixed.
		return gpuv1.StatePending, fmt.Sprintf("MIG devices do not survive a reboot or a driver reload: "+
			"waiting for MIG configuration %q to be applied again", g.Desired)
	case (g.Desired == "" || g.Desired == g.Applied) && g.State != gpuv1.MIGEviction:
		return gpuv1.StateReady, ""
	case g.EverServed || g.ServingNow:
		// Serving until its GPU pods are gone, whatever takes the device
		// plugin off meanwhile (a driver reload).
		return gpuv1.StateReady, ""
	case g.Refused != "":
		return gpuv1.StateFailed, "its MIG configuration is refused: " + g.Refused
	}
	return gpuv1.StatePending, fmt.Sprintf("waiting for MIG configuration %q to be applied", g.Desired)
}

// served reports whether a plugin has served the node's GPUs there, the
// device plugin or the DRA driver, before or in this decision
// (gpuv1.AnnotationServed).
func (d *decision) served() bool {
	return d.in.Node.Annotations[gpuv1.AnnotationServed] == gpuv1.LabelTrue ||
		d.values[state.DevicePlugin] == gpuv1.StateReady || d.values[state.DRADriver] == gpuv1.StateReady
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
	for _, plugin := range []state.Name{state.DevicePlugin, state.DRADriver} {
		if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(plugin))]) == gpuv1.StateReady {
			return true
		}
	}
	for _, q := range GPUResources(n.Status.Allocatable) {
		if q > 0 {
			return true
		}
	}
	return false
}
