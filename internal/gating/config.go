package gating

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Annotations of a node's device plugin configuration.
const (
	// AnnotationDevicePluginConfigRefused says why the node does not run
	// the configuration it is asked to; absent when it does.
	AnnotationDevicePluginConfigRefused = gpuv1.OperatorAnnotationPrefix + "device-plugin-config-refused"
	// AnnotationDevicePluginConfigWaiting says the node's configuration
	// changes once its GPU pods are gone.
	AnnotationDevicePluginConfigWaiting = gpuv1.OperatorAnnotationPrefix + "device-plugin-config-waiting"
)

// devicePluginConfig decides which configuration of devicePlugin.config's
// ConfigMap the node's device plugin and GFD run, "" for the policy's
// default: the node's nvidia.com/device-plugin.config label, else its
// driver pool's devicePluginConfig, else the default.
//
// A configuration the operator cannot run (no ConfigMap, a key it does
// not hold, a file the device plugin would not start with, MPS) is refused
// and the node keeps what it runs, from its last good copy where its file
// was broken or removed since, unless that is no longer runnable either:
// then it goes back to the default. Every change waits while GPU
// pods run on the node, that one too: the device IDs of shared GPUs
// differ from whole ones' (GPU-x::n), and the kubelet would hand a GPU a
// running pod holds to another pod. Each is told once, in an event, and
// stays in an annotation.
func (d *decision) devicePluginConfig() string {
	spec := &d.in.Policy.Spec
	cfg := spec.DevicePlugin.Config
	current := d.in.Node.Labels[gpuv1.LabelDevicePluginConfigInUse]
	want, from := d.in.Node.Labels[gpuv1.LabelDevicePluginConfig], "the node's label "+gpuv1.LabelDevicePluginConfig
	if want == "" {
		for _, p := range spec.Driver.PolicyPools() {
			if p.Name == d.in.DriverPool && p.DevicePluginConfig != "" {
				want, from = p.DevicePluginConfig, fmt.Sprintf("driver.nodePools[%s].devicePluginConfig", p.Name)
			}
		}
	}
	if d.mode != gpuv1.AllocationDevicePlugin {
		// No device plugin runs: its configuration is left off the node,
		// with no GPU pod of the plugin's to wait for.
		if want != "" {
			d.tell(AnnotationDevicePluginConfigRefused, "%s names device plugin configuration %q, which has no effect: "+
				"the node is in allocation mode %s, and runs no device plugin", from, want, d.mode)
		}
		return ""
	}
	if cfg == nil || cfg.Name == "" {
		if want != "" {
			d.tell(AnnotationDevicePluginConfigRefused, "%s names device plugin configuration %q, and devicePlugin.config.name "+
				"names no ConfigMap of configurations: set it. The node runs the device plugin's defaults.", from, want)
		}
		return ""
	}
	if want == cfg.Default {
		want = ""
	}
	if d.in.DevicePluginConfigs == nil {
		return current // the ConfigMap could not be read: nothing changes
	}
	var refused []string
	if problem := d.configProblem(cfg, cfg.Default); problem != "" {
		runs := "they run the device plugin's built-in defaults until it is fixed"
		if d.in.KeptDevicePluginConfigs[cfg.Default] {
			runs = "they run its last good copy until it is fixed"
		}
		refused = append(refused, fmt.Sprintf("devicePlugin.config.default %q: %s; %s.", cfg.Default, problem, runs))
	}
	next := want
	if problem := d.configProblem(cfg, want); problem != "" {
		next = current
		if !d.runnable(cfg, current) {
			next = ""
		}
		refused = append(refused, fmt.Sprintf("%s names device plugin configuration %q: %s. The node runs %s.",
			from, want, problem, d.displayRunning(next)))
	}
	if len(refused) > 0 {
		d.tell(AnnotationDevicePluginConfigRefused, "%s", strings.Join(refused, " "))
	}
	if next != current && next != "" && !d.in.CopiedDevicePluginConfigs[next] {
		// Not in the validated ConfigMap yet (the operator writes it in a
		// moment, or the API server refuses it, which the policy's status
		// says): its DaemonSet's pods could not read it.
		return current
	}
	// Even off a configuration that is refused now (its file broken, its
	// ConfigMap recreated): the running plugin still hands out its
	// devices, and the pods hold them.
	if next != current && d.in.GPUPods > 0 {
		d.tell(AnnotationDevicePluginConfigWaiting, "the device plugin configuration changes from %s to %s once the node's %d GPU pod(s) "+
			"are gone (drain the node to change it now)", displayConfig(current), displayConfig(next), d.in.GPUPods)
		d.requeue(d.in.GPUPodsRecheck)
		return current
	}
	return next
}

// configProblem says why the operator cannot run a configuration, "" when
// it can; the default ("") always can.
func (d *decision) configProblem(cfg *gpuv1.DevicePluginConfig, name string) string {
	if name == "" {
		return ""
	}
	problem, ok := d.in.DevicePluginConfigs[name]
	switch {
	case !ok && len(d.in.DevicePluginConfigs) == 0:
		return fmt.Sprintf("ConfigMap %s, in the operator's namespace, does not exist or holds no configuration", cfg.Name)
	case !ok:
		return fmt.Sprintf("ConfigMap %s holds no such configuration; it holds: %s", cfg.Name,
			strings.Join(slices.Sorted(maps.Keys(d.in.DevicePluginConfigs)), ", "))
	case problem == "" && d.in.MPSConfigs[name]:
		return d.mpsProblem()
	}
	return problem
}

// runnable reports whether the node can go on running a configuration:
// one the operator can run as written, or the last good copy of one
// broken or removed since, which still needs what MPS needs.
func (d *decision) runnable(cfg *gpuv1.DevicePluginConfig, name string) bool {
	if !d.in.KeptDevicePluginConfigs[name] {
		return d.configProblem(cfg, name) == ""
	}
	return !d.in.MPSConfigs[name] || d.mpsProblem() == ""
}

// displayRunning names the configuration a node runs in a message.
func (d *decision) displayRunning(name string) string {
	if name != "" && d.in.KeptDevicePluginConfigs[name] {
		return fmt.Sprintf("the last good copy of %s, which the operator keeps", name)
	}
	return displayConfig(name)
}

// mpsProblem says why the node cannot share its GPUs with MPS, "" when it
// can: k8s-device-plugin v0.20.0 refuses MPS under mig.strategy mixed
// (cmd/nvidia-device-plugin/main.go, validateFlags) and on MIG devices
// (internal/plugin/mps.go), and needs the MPS control daemon up.
func (d *decision) mpsProblem() string {
	switch {
	case d.in.Policy.Spec.MIG.StrategyOrDefault() == gpuv1.MIGStrategyMixed:
		return "the device plugin refuses MPS sharing under mig.strategy mixed"
	case d.migConfig != "" && d.migConfig != "all-disabled":
		return fmt.Sprintf("the node's MIG configuration is %q, and the device plugin refuses MPS sharing of MIG devices", d.migConfig)
	case d.optedOut(state.MPSControlDaemon):
		return fmt.Sprintf("the node is opted out of the MPS control daemon (%s), which the device plugin needs for MPS",
			gpuv1.DeployLabel(string(state.MPSControlDaemon)))
	}
	return ""
}

// tell records a message in an annotation, and in an event when the
// annotation did not say so already: events go with the writes of what
// the operator keeps on the node, and one that holds for days must not be
// told at every write.
func (d *decision) tell(annotation, format string, args ...any) {
	d.tellAs("DevicePluginConfig", annotation, format, args...)
}

// tellAs is tell with the event's reason.
func (d *decision) tellAs(reason, annotation, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.result.Annotations[annotation] = msg
	if d.in.Node.Annotations[annotation] != msg {
		d.event(true, reason, "%s", msg)
	}
}

func displayConfig(name string) string {
	if name == "" {
		return "the default"
	}
	return name
}

// runsMPS reports whether the node's device plugin configuration, as
// decided, shares its GPUs with MPS: the MPS control daemon runs there
// before the plugin. While the ConfigMap cannot be read, the node keeps
// what it runs.
func (d *decision) runsMPS() bool {
	if d.in.DevicePluginConfigs == nil && d.in.Policy.Spec.DevicePlugin.Config != nil {
		return d.current[state.MPSControlDaemon] != gpuv1.StateDisabled
	}
	return d.isMPS(d.variant.DevicePluginConfig)
}

// isMPS reports whether a configuration, "" for the default, shares GPUs
// with MPS.
func (d *decision) isMPS(name string) bool {
	cfg := d.in.Policy.Spec.DevicePlugin.Config
	if cfg == nil || cfg.Name == "" {
		return false
	}
	if name == "" {
		name = cfg.Default
	}
	return d.in.MPSConfigs[name]
}
