package maintenance

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// advertised judges what the node's plugin serves against the
// configuration applied, once its word counts. A device plugin's word
// counts once its state is ready again and its pod has been ready long
// enough for the kubelet to report allocatable; a DRA driver's once its
// state is ready again (published). Any plugin pod on the node now
// started after the apply: none was left when it began. (Its timestamps
// are not compared with the operator's clock, which may run ahead.)
func (r *Reconciler) advertised(cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node, configs migConfigs,
	f migreconfig.Facts) (migreconfig.Advertised, string) {
	if gating.AllocationModeOf(n) == gpuv1.AllocationDRA {
		return r.published(n, configs, f.Applied)
	}
	if !cp.Spec.DevicePlugin.IsEnabled() || gating.OptedOut(n.Labels, state.DevicePlugin) ||
		gating.AllocationModeOf(n) != gpuv1.AllocationDevicePlugin {
		return migreconfig.Matches, "" // nothing advertises: nothing to check
	}
	pod := o.pluginPods[n.Name]
	if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) != gpuv1.StateReady ||
		pod == nil || !pod.Ready || f.Now.Before(pod.ReadySince.Add(r.Timers.HealthSettle)) {
		return migreconfig.Unknown, ""
	}
	if configs.file == nil {
		return migreconfig.Differs, configs.problem
	}
	gpus := knownGPUs(n)
	// Exact counts need the GPU count, and no sharing, whose replicas
	// multiply them.
	shared := sharedNode(cp, n)
	exact := gpus > 0 && !configs.file.Filtered(f.Applied)
	layout, err := configs.file.LayoutOf(f.Applied, max(gpus, 1))
	if err != nil {
		return migreconfig.Differs, err.Error()
	}
	if configs.file.Filtered(f.Applied) {
		// What a device filter leaves depends on the GPU model: only the
		// plugin's readiness is checked.
		return migreconfig.Matches, ""
	}
	allocatable := map[string]int64{}
	for name, q := range gating.GPUResources(n.Status.Allocatable) {
		allocatable[string(name)] = q
	}
	product := ""
	if cp.Spec.GFD.IsEnabled() {
		product = n.Labels["nvidia.com/gpu.product"]
	}
	return migreconfig.Judge(layout, string(cp.Spec.MIG.StrategyOrDefault()), allocatable, product, exact, shared)
}

// inPlace says whether a node no configuration was applied on has the
// configuration already, once its plugin and GFD have settled (Unknown
// until then; on a node in allocation mode dra, the DRA driver's slices
// are read, see below): it advertises exactly what the configuration
// makes where GFD counted whole GPUs (MIG disabled already, as NVIDIA's
// default all-disabled has it), or, on a node partitioned already, it
// has mig-manager's word for it (a person's label, as NVIDIA's operator
// leaves it, and nvidia.com/mig.config.state=success) and advertises the
// configuration's MIG devices. Enabling migManager then restarts nothing
// on such nodes.
func (r *Reconciler) inPlace(cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node, configs migConfigs, config string,
	now time.Time) migreconfig.Advertised {
	if gating.AllocationModeOf(n) == gpuv1.AllocationDRA {
		// The DRA driver's slices say what the GPUs have once it serves,
		// and the count must be exact: a GPU in MIG mode without MIG
		// devices publishes nothing.
		if configs.file == nil || configs.file.Filtered(config) || !cp.Spec.GFD.IsEnabled() ||
			gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DRADriver))]) != gpuv1.StateReady {
			return migreconfig.Differs // not serving, or not knowable
		}
		if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.GPUFeatureDiscovery))]) != gpuv1.StateReady {
			return migreconfig.Unknown // GFD's GPU count is not there yet
		}
		if knownGPUs(n) == 0 {
			return migreconfig.Differs
		}
		got, _ := r.published(n, configs, config)
		return got
	}
	if configs.file == nil || configs.file.Filtered(config) || !cp.Spec.GFD.IsEnabled() ||
		gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) != gpuv1.StateReady {
		return migreconfig.Differs // not serving, or not knowable
	}
	if pod := o.pluginPods[n.Name]; pod == nil || !pod.Ready || now.Before(pod.ReadySince.Add(r.Timers.HealthSettle)) ||
		gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.GPUFeatureDiscovery))]) != gpuv1.StateReady {
		return migreconfig.Unknown
	}
	allocatable := map[string]int64{}
	for name, q := range gating.GPUResources(n.Status.Allocatable) {
		allocatable[string(name)] = q
	}
	judge := func(gpus int, exact bool) migreconfig.Advertised {
		layout, err := configs.file.LayoutOf(config, gpus)
		if err != nil {
			return migreconfig.Differs
		}
		got, _ := migreconfig.Judge(layout, string(cp.Spec.MIG.StrategyOrDefault()), allocatable, n.Labels["nvidia.com/gpu.product"],
			exact, sharedNode(cp, n))
		return got
	}
	if gpus := gpuCount(n); gpus > 0 {
		return judge(gpus, true)
	}
	if n.Labels[gpuv1.LabelMIGConfig] == config && n.Annotations[gpuv1.AnnotationMIGConfigWritten] != config &&
		n.Labels[gpuv1.LabelMIGConfigState] == gpuv1.MIGConfigSuccess {
		return judge(1, false)
	}
	return migreconfig.Differs
}

// published judges what the DRA driver's ResourceSlices name on a node in
// allocation mode dra against a configuration, once its state is ready
// (the reconfiguration took its plugin off, and the state is ready again
// only once a plugin started since published complete slices): the
// driver publishes the MIG devices a GPU has when its plugin starts.
// Unknown until then, or while the slices cannot be read.
func (r *Reconciler) published(n *corev1.Node, configs migConfigs, config string) (migreconfig.Advertised, string) {
	switch gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DRADriver))]) {
	case gpuv1.StateDisabled:
		return migreconfig.Matches, "" // opted out of the DRA driver: nothing serves
	case gpuv1.StateReady:
	default:
		return migreconfig.Unknown, ""
	}
	if configs.file == nil {
		return migreconfig.Differs, configs.problem
	}
	if configs.file.Filtered(config) {
		// What a device filter leaves depends on the GPU model: only
		// the driver's readiness is checked.
		return migreconfig.Matches, ""
	}
	if r.Slices == nil {
		return migreconfig.Unknown, ""
	}
	slices, err := r.Slices.OnNode(n.Name)
	if err != nil || !slices.Complete() {
		return migreconfig.Unknown, ""
	}
	// Without GFD's count, the GPUs the slices name: every GPU of a
	// configuration the DRA driver serves is named (draRefusal), but one
	// an apply left without devices would not be, so counts are not
	// compared then.
	gpus := knownGPUs(n)
	layout, err := configs.file.LayoutOf(config, max(gpus, slices.GPUs, 1))
	if err != nil {
		return migreconfig.Differs, err.Error()
	}
	return migreconfig.JudgeSlices(layout, migreconfig.Published{WholeGPUs: slices.WholeGPUs, MIGDevices: slices.MIGDevices}, gpus > 0)
}

// knownGPUs is the node's GPU count: GFD's while no GPU is partitioned,
// else the one recorded then; 0 when never known.
func knownGPUs(n *corev1.Node) int {
	if c := gpuCount(n); c > 0 {
		return c
	}
	c, _ := strconv.Atoi(n.Annotations[AnnotationMIGGPUs])
	return max(c, 0)
}

// sharedNode reports whether the node's device plugin runs a
// configuration of devicePlugin.config, which may share (and rename)
// the whole GPUs' resource.
func sharedNode(cp *gpuv1.ClusterPolicy, n *corev1.Node) bool {
	cfg := cp.Spec.DevicePlugin.Config
	return cfg != nil && cfg.Name != "" && (cfg.Default != "" || n.Labels[gpuv1.LabelDevicePluginConfigInUse] != "")
}

// gpuCount reads the node's GPU count from GFD while no GPU is
// partitioned (GFD counts MIG devices under the single strategy); 0 when
// it cannot be known now.
func gpuCount(n *corev1.Node) int {
	if strings.Contains(n.Labels["nvidia.com/gpu.product"], "-MIG-") {
		return 0
	}
	for name, q := range gating.GPUResources(n.Status.Capacity) {
		if strings.HasPrefix(string(name), "nvidia.com/mig-") && q > 0 {
			return 0
		}
	}
	if gating.GFDCountsMIGDevices(n.Labels) {
		return 0 // a DRA node has no capacity to say so; GFD's labels do
	}
	c, err := strconv.Atoi(n.Labels["nvidia.com/gpu.count"])
	if err != nil || c < 0 {
		return 0
	}
	return c
}
