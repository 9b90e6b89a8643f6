package maintenance

import (
	"context"
	"errors"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
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
	// AnnotationExpectedLayout is the MIG configuration applied when the
	// repair started, whose units AnnotationExpectedGPUs counts: a layout
	// applied since (within the repair's validation, its devices gone)
	// counts other units.
	AnnotationExpectedLayout = gpuv1.RemediationAnnotationPrefix + "expected-layout"
	// AnnotationLastRepaired is when the node's last repair healed it.
	AnnotationLastRepaired = gpuv1.RemediationAnnotationPrefix + "last-repaired"
)

// errStale says a write was not made because the node changed since it was
// read: the step is taken again at the next look, which must come even if
// the change wakes nothing (a taint, a status).
var errStale = errors.New("the node changed since it was read")

// remediationEvent is the reason of the events on a node's repair.
const remediationEvent = "GPURemediation"

// repairs is the repair's machine.
type repairs struct{}

func (repairs) operation() arbiter.Operation { return arbiter.Repair }

func (repairs) runs(p *pass, n *corev1.Node) bool {
	return p.cp != nil && p.cp.Spec.Operator.Remediation.Enabled && gating.IsGPUNode(n)
}

// position: a remediation-required node starts on its own or once a
// person approved it, once Ready, and not while the kubelet still shows
// the old resource of a MIG reconfiguration just done as unallocatable.
func (repairs) position(_ context.Context, p *pass, n *corev1.Node, view *arbiter.Node) {
	approved := n.Annotations[gpuv1.AnnotationRemediationApproved] == gpuv1.LabelTrue
	queued := (p.repairPolicy().AutoStart || approved) && nodeReady(n) && !p.r.migJustDone(n, p.now)
	view.Ops[arbiter.Repair] = arbiter.Position{
		Phase: arbiter.RepairPhase(remediationStateOf(n), queued),
		Since: sinceOf(n, AnnotationRemediationSince),
	}
}

func (repairs) step(ctx context.Context, p *pass, n *corev1.Node, t turn) (stepped, error) {
	f, err := p.r.remediationFacts(ctx, p, n)
	if err != nil {
		return stepped{node: n}, err
	}
	f.Admitted = t.admitted()
	pol := p.repairPolicy()
	// Its timeouts read the node's one clock; the state is written with
	// its own time.
	clocked := f
	clocked.Since = t.clock(f.Since, f.Now)
	step := remediation.Next(clocked, pol)
	// A required node counts as queued here whatever holds it back: only
	// starts and resumes are vetted, and Admit vetted the starts.
	log, logs := verbose(ctx)
	if ok, why := t.vet(arbiter.RepairPhase(f.State, true), arbiter.RepairPhase(step.Next, true)); !ok {
		if logs {
			log.Info("repair step held back", "node", n.Name, "state", f.State, "next", step.Next, "why", why)
		}
		step = remediation.Step{Next: f.State}
	}
	if logs {
		log.Info("remediation step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
	}
	keep := t.keepForward(&f.Since, f.Now, pol.ValidationTimeout, step.Next == f.State)
	node, next, err := p.r.takeRemediation(ctx, p, n, f, step, keep)
	// Only steps under way poll, for their timeouts and the pods they
	// list live; a node waiting for the budget, an approval, an upgrade
	// or a reboot is woken by the node change that lets it go on. One
	// waiting out the kubelet's grace after a MIG change (a start held
	// back, GPUs it cannot judge yet) polls too: no node change need come
	// when the grace ends.
	graced := next != "" && next != gpuv1.RemediationDone && p.r.migJustDone(n, p.now) &&
		(next != gpuv1.RemediationRequired || (pol.AutoStart || f.Approved) && nodeReady(n))
	return stepped{node: node, busy: remediation.InProgress(next) || graced}, err
}

func (repairs) forget(ctx context.Context, p *pass, n *corev1.Node) error {
	return p.r.forgetRemediation(ctx, n)
}

// ownedDriver reports whether the node's driver pod, if any, has a
// DaemonSet that stays: one orphaned, or whose DaemonSet is going, would
// not come back once deleted.
func (o *observed) ownedDriver(node string) bool {
	p := o.driverPods[node]
	return p == nil || (p.DaemonSet != "" && !o.deleting[p.DaemonSet])
}

// remediationFacts gathers what the repair's state machine needs about a
// node. Workload pods are listed live, and only while they are evicted.
func (r *Reconciler) remediationFacts(ctx context.Context, p *pass, n *corev1.Node) (remediation.Facts, error) {
	cp, o := p.cp, p.obs
	f := remediation.Facts{
		State:         remediationStateOf(n),
		Now:           p.now,
		UnhealthyGPUs: r.unhealthyGPUs(n),
		Approved:      n.Annotations[gpuv1.AnnotationRemediationApproved] == gpuv1.LabelTrue,
		UpgradeHeld:   arbiter.UpgradeHeld(stateOf(n), autoUpgrade(p.upgradeSpec(n)), n.Labels[gpuv1.LabelUpgradeSkip] == gpuv1.LabelTrue),
		// The driver container runs there: a reload replaces its pod.
		// A driver a pool holds (a conflict, no NVIDIADriver, one not run)
		// would not come back once its pod is deleted.
		DriverReloadable: cp.Spec.Driver.IsEnabled() && n.Labels[gpuv1.LabelDriverRoot] == string(gpuv1.DriverRootContainer) &&
			!o.pools.Assign(n.Name, n.Labels).Held() && o.ownedDriver(n.Name),
		DownstreamPods: o.downstream[n.Name],
	}
	f.Since = f.Now
	if t, ok := stamp(n.Annotations[AnnotationRemediationSince]); ok {
		f.Since = t
	}
	replaced := types.UID(n.Annotations[AnnotationReplacedPod])
	plugin, driverPod := o.servingPlugin(n), o.driverPods[n.Name]
	bootID := n.Annotations[AnnotationBootID]
	f.Rebooted = bootID != "" && bootID != n.Status.NodeInfo.BootID
	f.AfterReboot = bootID != ""
	// Only the steps that would reload the driver read whether it is
	// outdated: the fleet's other nodes are not looked up each pass.
	outdated := func() bool { return driverPod != nil && o.outdated(driverPod, n) }
	health := func(replaced types.UID) remediation.Health {
		return r.repairHealth(n, plugin, replaced, f.Now)
	}
	switch f.State {
	case gpuv1.RemediationEviction:
		if last, err := time.Parse(time.RFC3339, n.Annotations[AnnotationLastRepaired]); err == nil {
			f.Recurrent = f.Since.Sub(last) < r.Timers.RepairRecurrenceWindow
		}
		var err error
		f.GPUPods, err = r.countPods(ctx, n.Name, nil, p.gpuPodEviction(ctx, n, arbiter.Repair).keep)
		return f, err
	case gpuv1.RemediationDevicePluginRestart:
		f.PluginToReplace = plugin != nil && replaced != "" && plugin.UID == replaced
		f.Plugin = health(replaced)
		f.DriverOutdated = outdated()
	case gpuv1.RemediationDriverReload:
		f.DriverReplaced = driverPod != nil && driverPod.UID != replaced
		f.DriverOutdated = outdated()
	case gpuv1.RemediationValidation, gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed:
		f.Plugin = health("")
	}
	return f, nil
}

// repairHealth is the plugin's word on the GPUs a repair waits for. A MIG
// layout applied since the repair started (the table lets one in within
// its validation, to make the devices its reload destroyed) counts other
// units than the repair's start did: any usable unit will do. For the
// kubelet's grace after a MIG change ended, the old resource is still
// listed unallocatable, which reads as unhealthy GPUs: no word yet.
func (r *Reconciler) repairHealth(n *corev1.Node, plugin *operandpods.Pod, replaced types.UID, now time.Time) remediation.Health {
	if r.migJustDone(n, now) {
		return remediation.Unknown
	}
	expected := expectedGPUs(n)
	if n.Annotations[AnnotationExpectedLayout] != n.Annotations[gpuv1.AnnotationMIGApplied] {
		expected = 0
	}
	return r.pluginHealth(n, plugin, replaced, expected, now)
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

// pluginHealth is what the plugin of the node's allocation mode says of
// its GPUs, once its word counts: its state is ready again since the
// node's last boot, and its pod (not the one replaced) has been ready for
// a while, since the kubelet reports allocatable again only at its next
// status update after the device plugin registers. Healthy means every
// registered GPU is usable again (allocatable; in the DRA driver's slices,
// untainted), and as many as when the repair started (at least one): a
// GPU gone from the bus is gone from capacity, or the slices, too once
// the plugin registers again.
func (r *Reconciler) pluginHealth(n *corev1.Node, pod *operandpods.Pod, replaced types.UID, expected int64, now time.Time) remediation.Health {
	gpus := r.gpusOf(n)
	if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(gpus.plugin))]) != gpuv1.StateReady ||
		n.Annotations[gating.AnnotationBootID] != n.Status.NodeInfo.BootID || !gpus.known {
		return remediation.Unknown // the node controller has not judged the plugin since the last boot
	}
	if pod == nil || pod.UID == replaced || !pod.Ready || now.Before(pod.ReadySince.Add(r.Timers.HealthSettle)) {
		return remediation.Unknown
	}
	if gpus.registered == 0 {
		return remediation.Unknown // not registered again yet, or wiped
	}
	if gpus.unhealthy() > 0 || gpus.usable < expected {
		return remediation.Unhealthy
	}
	return remediation.Healthy
}

// unhealthyGPUs is the node controller's count of the node's unhealthy
// GPUs, judged from a settled plugin, while the node still shows them:
// the count is cleared only at the node controller's next look, and a
// repair that has just healed the GPUs must not start again on it.
func (r *Reconciler) unhealthyGPUs(n *corev1.Node) int64 {
	gpus := r.gpusOf(n)
	switch {
	case !gpus.known:
		// The slices cannot be read now (not listed yet, a pool being
		// published): the count as last recorded stands, and a queued
		// repair keeps its place.
	case gpus.unhealthy() == 0:
		return 0
	}
	return gating.UnhealthyGPUsOf(n)
}

func remediationStateOf(n *corev1.Node) gpuv1.RemediationState {
	return gpuv1.RemediationState(n.Labels[gpuv1.LabelRemediationState])
}

// repairPolicy is the policy's remediation settings and the operator's
// timers, as the transition table reads them.
func (p *pass) repairPolicy() remediation.Policy {
	spec, r := &p.cp.Spec.Operator.Remediation, p.r
	return remediation.Policy{
		AutoStart:            spec.AutoStarts(),
		EvictionTimeout:      time.Duration(spec.EvictionTimeout()) * time.Second,
		ValidationTimeout:    time.Duration(spec.ValidationTimeout()) * time.Second,
		DriverReplaceTimeout: r.Timers.DriverReplaceTimeout,
		RecurrenceWindow:     r.Timers.RepairRecurrenceWindow,
	}
}
