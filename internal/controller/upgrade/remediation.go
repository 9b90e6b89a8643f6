package upgrade

import (
	"context"
	"errors"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// Annotations of a node's repair.
const (
	// AnnotationRemediationSince is when the node entered its repair state.
	AnnotationRemediationSince = gpuv1.RemediationAnnotationPrefix + "since"
	// AnnotationReplacedPod is the UID of the pod the step replaces: the
	// device plugin pod it restarts, the driver pod it reloads.
	AnnotationReplacedPod = gpuv1.RemediationAnnotationPrefix + "replaced-pod"
	// AnnotationBootID is the node's boot ID when it was marked
	// reboot-required or failed: another one says it rebooted. A
	// validation that keeps it validates a reboot.
	AnnotationBootID = gpuv1.RemediationAnnotationPrefix + "boot-id"
	// AnnotationReason says why the node is reboot-required or failed.
	AnnotationReason = gpuv1.RemediationAnnotationPrefix + "reason"
	// AnnotationExpectedGPUs is how many GPUs the node registered when its
	// repair started: a GPU that fell off the bus leaves the capacity the
	// device plugin registers again, and must not pass for healed.
	AnnotationExpectedGPUs = gpuv1.RemediationAnnotationPrefix + "expected-gpus"
	// AnnotationLastRepaired is when the node's last repair healed it.
	AnnotationLastRepaired = gpuv1.RemediationAnnotationPrefix + "last-repaired"
)

// errStale says a write was not made because the node changed since it was
// read: the step is taken again at the next look, which must come even if
// the change wakes nothing (a taint, a status).
var errStale = errors.New("the node changed since it was read")

// remediationEvent is the reason of the events on a node's repair.
const remediationEvent = "GPURemediation"

// remediate steps the GPU nodes of the active policy through the repair of
// their unhealthy GPUs, within the budget repairs share with driver
// upgrades. It returns the nodes out of service for a repair after this
// look, which driver upgrades count against their budget and never admit,
// and whether any node is on its way.
func (r *Reconciler) remediate(ctx context.Context, cp *gpuv1.ClusterPolicy, obs *observed, nodes []corev1.Node) (map[string]bool, bool, error) {
	if cp == nil || !cp.Spec.Operator.Remediation.Enabled {
		err := r.forgetRemediations(ctx, nodes)
		return nil, errors.Is(err, errStale), ignoreStale(err)
	}
	spec := &cp.Spec.Operator.Remediation
	var gpuNodes []*corev1.Node
	var others []corev1.Node
	for i := range nodes {
		if gating.IsGPUNode(&nodes[i]) {
			gpuNodes = append(gpuNodes, &nodes[i])
		} else {
			others = append(others, nodes[i])
		}
	}
	forgotten := r.forgetRemediations(ctx, others)
	p := remediationPolicyOf(spec)
	// The nodes out of service for a repair as the cache has them: what
	// upgrades count even if no node can step in this look.
	out := map[string]bool{}
	candidates := make([]remediation.Node, 0, len(gpuNodes))
	for _, n := range gpuNodes {
		st := remediationStateOf(n)
		out[n.Name] = remediation.Tainted(st)
		approved := n.Annotations[gpuv1.AnnotationRemediationApproved] == gpuv1.LabelTrue
		candidates = append(candidates, remediation.Node{
			Name: n.Name,
			Busy: remediation.Tainted(st) || upgrade.InProgress(stateOf(n)) || migreconfig.Tainted(migStateOf(n)),
			Waiting: st == gpuv1.RemediationRequired && (p.AutoStart || approved) && nodeReady(n) && !upgrading(cp, n) &&
				!migHeld(n, r.now()),
		})
	}
	admitted, err := remediation.Admit(candidates, spec.MaxParallelOrDefault())
	if err != nil {
		return out, true, errors.Join(err, ignoreStale(forgotten))
	}
	sel, err := parseSelectors(&cp.Spec.Driver.UpgradePolicy)
	if err != nil {
		return out, true, errors.Join(err, ignoreStale(forgotten))
	}
	next := make([]gpuv1.RemediationState, len(gpuNodes))
	errs := make([]error, len(gpuNodes))
	workqueue.ParallelizeUntil(ctx, stepWorkers, len(gpuNodes), func(i int) {
		n := gpuNodes[i]
		next[i] = remediationStateOf(n)
		f, err := r.remediationFacts(ctx, cp, obs, n, sel)
		if err != nil {
			errs[i] = err
			return
		}
		f.Admitted = admitted[n.Name]
		step := remediation.Next(f, p)
		ctrl.LoggerFrom(ctx).V(1).Info("remediation step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
		next[i], errs[i] = r.takeRemediation(ctx, cp, obs, n, f, step, sel)
	})
	busy := errors.Is(forgotten, errStale)
	for i, n := range gpuNodes {
		switch {
		case errors.Is(errs[i], errStale):
			busy = true
		case errs[i] != nil:
			ctrl.LoggerFrom(ctx).Error(errs[i], "remediation step failed; retrying at the next look", "node", n.Name, "after", poll)
			busy = true
		}
		// A node is out of service from before its step to after it: an
		// upgrade must not start on a node whose repair just started, nor
		// on one whose write did not land.
		out[n.Name] = out[n.Name] || remediation.Tainted(next[i])
		// Only steps under way poll, for their timeouts and the pods they
		// list live; a node waiting for the budget, an approval, an
		// upgrade or a reboot is woken by the node change that lets it go
		// on.
		busy = busy || remediation.InProgress(next[i])
	}
	return out, busy, ignoreStale(forgotten)
}

func ignoreStale(err error) error {
	if errors.Is(err, errStale) {
		return nil
	}
	return err
}

// remediationFacts gathers what the repair's state machine needs about a
// node. Workload pods are listed live, and only while they are evicted.
func (r *Reconciler) remediationFacts(ctx context.Context, cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node,
	sel *podSelectors) (remediation.Facts, error) {
	f := remediation.Facts{
		State:         remediationStateOf(n),
		Now:           r.now(),
		UnhealthyGPUs: unhealthyGPUs(n),
		Approved:      n.Annotations[gpuv1.AnnotationRemediationApproved] == gpuv1.LabelTrue,
		Upgrading:     upgrading(cp, n),
		UpgradeHeld:   !policyOf(&cp.Spec.Driver.UpgradePolicy).AutoUpgrade || n.Labels[gpuv1.LabelUpgradeSkip] == gpuv1.LabelTrue,
		// The driver container runs there: a reload replaces its pod.
		DriverReloadable: cp.Spec.Driver.IsEnabled() && n.Labels[gpuv1.LabelDriverRoot] == string(gpuv1.DriverRootContainer),
		DownstreamPods:   o.downstream[n.Name],
	}
	f.Since = f.Now
	if t, err := time.Parse(time.RFC3339, n.Annotations[AnnotationRemediationSince]); err == nil {
		f.Since = t
	}
	replaced := types.UID(n.Annotations[AnnotationReplacedPod])
	plugin, driverPod := o.pluginPods[n.Name], o.driverPods[n.Name]
	bootID := n.Annotations[AnnotationBootID]
	f.Rebooted = bootID != "" && bootID != n.Status.NodeInfo.BootID
	f.AfterReboot = bootID != ""
	// Only the steps that would reload the driver read whether it is
	// outdated: the fleet's other nodes are not looked up each pass.
	outdated := func() bool { return driverPod != nil && o.outdated(driverPod, &cp.Spec.Driver, n) }
	expected := expectedGPUs(n)
	switch f.State {
	case gpuv1.RemediationEviction:
		if last, err := time.Parse(time.RFC3339, n.Annotations[AnnotationLastRepaired]); err == nil {
			f.Recurrent = f.Since.Sub(last) < remediation.RecurrenceWindow
		}
		var err error
		f.GPUPods, err = r.countPods(ctx, n.Name, nil, r.isGPUPod(cp, sel.gpuExtra))
		return f, err
	case gpuv1.RemediationDevicePluginRestart:
		f.PluginToReplace = plugin != nil && replaced != "" && plugin.UID == replaced
		f.Plugin = r.pluginHealth(n, plugin, replaced, expected, f.Now)
		f.DriverOutdated = outdated()
	case gpuv1.RemediationDriverReload:
		f.DriverReplaced = driverPod != nil && driverPod.UID != replaced
		f.DriverOutdated = outdated()
	case gpuv1.RemediationValidation, gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed:
		f.Plugin = r.pluginHealth(n, plugin, "", expected, f.Now)
	}
	return f, nil
}

// expectedGPUs reads how many GPUs the node registered when its repair
// started; 0 when unknown.
func expectedGPUs(n *corev1.Node) int64 {
	v, err := strconv.ParseInt(n.Annotations[AnnotationExpectedGPUs], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// gpuTotal adds up the GPU resources of a resource list.
func gpuTotal(l corev1.ResourceList) int64 {
	var total int64
	for _, q := range gating.GPUResources(l) {
		total += q
	}
	return total
}

// pluginHealth is what the node's device plugin says of its GPUs, once its
// word counts: its state is ready again since the node's last boot, and
// its pod (not the one replaced) has been ready for a while, since the
// kubelet reports allocatable again only at its next status update after
// the plugin registers. Healthy means every registered GPU is allocatable
// again, and as many as when the repair started (at least one): a GPU
// gone from the bus is gone from capacity too once the plugin registers
// again.
func (r *Reconciler) pluginHealth(n *corev1.Node, pod *operandpods.Pod, replaced types.UID, expected int64, now time.Time) remediation.Health {
	if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) != gpuv1.StateReady ||
		n.Annotations[gating.AnnotationBootID] != n.Status.NodeInfo.BootID {
		return remediation.Unknown // the node controller has not judged the plugin since the last boot
	}
	if pod == nil || pod.UID == replaced || !pod.Ready || now.Before(pod.ReadySince.Add(gating.HealthSettle)) {
		return remediation.Unknown
	}
	allocatable := gpuTotal(n.Status.Allocatable)
	if unhealthy, _ := gating.UnhealthyGPUs(n); unhealthy > 0 || allocatable < expected {
		return remediation.Unhealthy
	}
	if allocatable == 0 {
		return remediation.Unknown
	}
	return remediation.Healthy
}

// unhealthyGPUs is the node controller's count of the node's unhealthy
// GPUs, judged from a settled device plugin, while the node still shows
// them: the count is cleared only at the node controller's next look, and
// a repair that has just healed the GPUs must not start again on it.
func unhealthyGPUs(n *corev1.Node) int64 {
	if now, _ := gating.UnhealthyGPUs(n); now == 0 {
		return 0
	}
	return gating.UnhealthyGPUsOf(n)
}

// upgrading reports whether the node is in a driver upgrade step, or waits
// for one that will start on its own: the upgrade goes first.
func upgrading(cp *gpuv1.ClusterPolicy, n *corev1.Node) bool {
	st := stateOf(n)
	p := policyOf(&cp.Spec.Driver.UpgradePolicy)
	return upgrade.InProgress(st) ||
		(st == gpuv1.UpgradeRequired && p.AutoUpgrade && n.Labels[gpuv1.LabelUpgradeSkip] != gpuv1.LabelTrue)
}

func remediationStateOf(n *corev1.Node) gpuv1.RemediationState {
	return gpuv1.RemediationState(n.Labels[gpuv1.LabelRemediationState])
}

func remediationPolicyOf(spec *gpuv1.RemediationSpec) remediation.Policy {
	return remediation.Policy{
		AutoStart:         spec.AutoStarts(),
		EvictionTimeout:   time.Duration(spec.EvictionTimeout()) * time.Second,
		ValidationTimeout: time.Duration(spec.ValidationTimeout()) * time.Second,
	}
}
