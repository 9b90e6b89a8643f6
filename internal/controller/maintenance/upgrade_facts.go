package maintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// facts gathers what the upgrade's table needs about a node. Workload pods
// are listed live, and only in the steps that look at them.
func (r *Reconciler) facts(ctx context.Context, p *pass, n *corev1.Node) (upgrade.Facts, error) {
	o := p.obs
	_, sel := p.evictionSpec(n)
	st := stateOf(n)
	f := upgrade.Facts{State: st, Now: p.now, Skip: n.Labels[gpuv1.LabelUpgradeSkip] == gpuv1.LabelTrue,
		Cordoned: n.Annotations[AnnotationCordoned] == gpuv1.LabelTrue}
	f.Since = f.Now
	if t, ok := stamp(n.Annotations[AnnotationSince]); ok {
		f.Since = t
	}
	pod := o.driverPods[n.Name]
	f.Outdated = (pod != nil && o.outdated(pod, n)) || (pod == nil && st == gpuv1.UpgradePodRestart)
	f.DriverReady = pod != nil && pod.Ready
	f.DownstreamPods = o.downstream[n.Name]
	f.ReplacedByHand, f.OutdatedPodGone = p.outdatedPodFate(n)
	var err error
	switch st {
	case gpuv1.UpgradeWaitForJobs:
		if sel.waitFor != nil {
			f.JobsRunning, err = r.countPods(ctx, n.Name, sel.waitFor, func(*corev1.Pod) bool { return true })
		}
	case gpuv1.UpgradePodDeletion:
		f.GPUPods, err = r.countPods(ctx, n.Name, nil, p.gpuPodEviction(ctx, n, arbiter.DriverUpgrade).keep)
	case gpuv1.UpgradeDrainRequired:
		if f.GPUPods, err = r.countPods(ctx, n.Name, nil, p.gpuPodEviction(ctx, n, arbiter.DriverUpgrade).keep); err == nil {
			f.DrainPods, err = r.countPods(ctx, n.Name, nil, r.isDrainable(sel.drain))
		}
	case gpuv1.UpgradeValidation:
		f.Validated = r.validated(o, n, pod)
	}
	return f, err
}

// validated reports whether the new driver works on the node: its pod is
// ready and current, and the plugin of the node's allocation mode is ready
// again (unless disabled): the device plugin, with the node advertising
// GPUs, whole, shared or MIG; or the DRA driver, whose state is ready only
// once a pod started after the driver published slices naming the GPUs.
func (r *Reconciler) validated(o *observed, n *corev1.Node, pod *operandpods.Pod) bool {
	if pod == nil || o.outdated(pod, n) || !pod.Ready {
		return false
	}
	plugin := state.DevicePlugin
	if gating.AllocationModeOf(n) == gpuv1.AllocationDRA {
		plugin = state.DRADriver
	}
	switch gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(plugin))]) {
	case gpuv1.StateDisabled:
		return true
	case gpuv1.StateReady:
		// Any GPU resource: a shared configuration may advertise
		// nvidia.com/gpu.shared alone, MIG nvidia.com/mig-*.
		return plugin == state.DRADriver || gpuTotal(n.Status.Allocatable) > 0
	}
	return false
}
