package gating

import (
	"fmt"
	"strings"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// decideVariant decides where the node's driver lives and which runtime it
// runs, and labels the node with both: the operands whose pods depend on
// them run one DaemonSet per variant, selected by these labels.
//
// The driver lives on the host when the node does not get the driver
// container (disabled in the policy, or opted out by its deploy label, as
// with pre-installed), or when the driver pod found the host's own driver:
// that finding is kept in an annotation, so the node never gets the driver
// container again until a person removes it.
func (d *decision) decideVariant() {
	n := d.in.Node
	def := state.DefaultVariant(&d.in.Policy.Spec)
	runtime := def.Runtime
	if r, ok := state.RuntimeOf(n.Status.NodeInfo.ContainerRuntimeVersion); ok {
		runtime = r
	}
	d.hostDriver = n.Annotations[gpuv1.AnnotationHostDriver]
	if found := hostDriverFound(d.in.Pods[state.Driver]); found != "" && d.hostDriver == "" {
		d.hostDriver = found
		d.event(false, "HostDriverFound", "%s: the node uses it, and the driver container leaves the node", found)
	}
	root := gpuv1.DriverRootContainer
	if d.hostDriver != "" || d.optedOut(state.Driver) {
		root = gpuv1.DriverRootHost
	}
	d.variant = state.Variant{DriverRoot: root, Runtime: runtime, DevicePluginConfig: d.devicePluginConfig()}
	d.result.Labels[gpuv1.LabelDriverRoot] = string(root)
	d.result.Labels[gpuv1.LabelContainerRuntime] = string(runtime)
	setIfNonEmpty(d.result.Labels, gpuv1.LabelDevicePluginConfigInUse, d.variant.DevicePluginConfig)
	setIfNonEmpty(d.result.Annotations, gpuv1.AnnotationHostDriver, d.hostDriver)
}

// resetOnVariantChange restarts, in order, the toolkit and every state
// after the driver when the node's driver root or runtime changed: their
// pods run another DaemonSet's spec now (a driver root moved from the
// driver container to the host, or a node reinstalled with another
// runtime). A new device plugin configuration moves the device plugin and
// GFD to their DaemonSets of it, and restarts nothing else, but for the
// MPS control daemon when either configuration shares GPUs with MPS.
func (d *decision) resetOnVariantChange() {
	old, ok := state.VariantOfLabels(d.in.Node.Labels)
	if ok && old.DevicePluginConfig != d.variant.DevicePluginConfig && (d.isMPS(old.DevicePluginConfig) || d.isMPS(d.variant.DevicePluginConfig)) {
		// Another MPS daemon, or none: the plugin of the new
		// configuration waits for the daemon of it, which the grace
		// period of a replaced pod would otherwise hide.
		if cur := d.current[state.MPSControlDaemon]; cur == gpuv1.StateReady {
			d.current[state.MPSControlDaemon] = gpuv1.StatePending
			d.notBefore[state.MPSControlDaemon] = d.now
			d.leave(state.MPSControlDaemon, cur, gpuv1.StatePending, fmt.Sprintf("the device plugin configuration changed from %s to %s",
				displayConfig(old.DevicePluginConfig), displayConfig(d.variant.DevicePluginConfig)))
		}
	}
	if !ok || (old.DriverRoot == d.variant.DriverRoot && old.Runtime == d.variant.Runtime) {
		return
	}
	var restarted []state.Name
	for _, name := range d.in.Graph.PerNode() {
		if name == state.Driver || d.current[name] == gpuv1.StateDisabled {
			continue
		}
		d.current[name] = gpuv1.StatePending
		d.notBefore[name] = d.now
		restarted = append(restarted, name)
	}
	if len(restarted) > 0 {
		d.event(true, "VariantChanged", "driver root %s -> %s, container runtime %s -> %s: restarting %s",
			old.DriverRoot, d.variant.DriverRoot, old.Runtime, d.variant.Runtime, joinNames(restarted))
	}
}

// hostDriverFound returns what the driver pod's check found on the host,
// or "" when it found nothing.
func hostDriverFound(pod *state.PodFacts) string {
	if pod == nil {
		return ""
	}
	exit, ok := pod.ExitOf(driver.HostDriverCheckName)
	if !ok || exit.Code != driver.HostDriverExitCode {
		return ""
	}
	if msg := strings.TrimSpace(exit.Message); msg != "" {
		return msg
	}
	return "the host runs its own NVIDIA driver"
}
