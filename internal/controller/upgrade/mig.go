package upgrade

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// Annotations of a node's MIG reconfiguration.
const (
	// AnnotationMIGSince is when the node entered its reconfiguration state.
	AnnotationMIGSince = gpuv1.MIGReconfigureAnnotationPrefix + "since"
	// AnnotationMIGTarget is the configuration the reconfiguration applies.
	AnnotationMIGTarget = gpuv1.MIGReconfigureAnnotationPrefix + "target"
	// AnnotationMIGAttempt is the apply attempt under way, and
	// AnnotationMIGAttemptSince when it started.
	AnnotationMIGAttempt      = gpuv1.MIGReconfigureAnnotationPrefix + "attempt"
	AnnotationMIGAttemptSince = gpuv1.MIGReconfigureAnnotationPrefix + "attempt-since"
	// AnnotationMIGAttemptUnder is the node's boot and driver pod when
	// the attempt started (gating.DriverGeneration): the devices it
	// creates last as long as they do, even if the operator learns of
	// its success under another.
	AnnotationMIGAttemptUnder = gpuv1.MIGReconfigureAnnotationPrefix + "attempt-under"
	// AnnotationMIGGPUs is how many GPUs the node has, read from GFD while
	// none of them was partitioned: it makes the check of a new layout's
	// counts exact.
	AnnotationMIGGPUs = gpuv1.MIGReconfigureAnnotationPrefix + "gpus"
)

// migEvent is the reason of the events on a node's MIG reconfiguration.
const migEvent = "GPUMIGReconfigure"

// kubeletResourceGrace is how long the kubelet keeps a resource whose
// device plugin stopped advertising it, unallocatable, in the node's
// capacity (kubelet's devicemanager endpointStopGracePeriod, 5 minutes):
// after a MIG reconfiguration the old resource looks like unhealthy GPUs
// until then, and no repair may start on it.
const kubeletResourceGrace = 6 * time.Minute

// reconfigureMIG steps the GPU nodes of the active policy through the
// reconfiguration of their MIG devices, within migManager.maxParallel.
// held are the nodes repairs and driver upgrades hold: none starts a
// reconfiguration. It returns the nodes out of service for one after this
// look, which upgrades and repairs count and never start on, and whether
// any node is on its way.
func (r *Reconciler) reconfigureMIG(ctx context.Context, cp *gpuv1.ClusterPolicy, obs *observed, nodes []corev1.Node,
	held map[string]bool) (map[string]bool, bool, error) {
	if cp == nil || !cp.Spec.MIGManager.Manages() {
		err := r.forgetMIG(ctx, nodes, cp == nil)
		return nil, errors.Is(err, errStale), ignoreStale(err)
	}
	spec := &cp.Spec.MIGManager
	var gpuNodes []*corev1.Node
	var others []corev1.Node
	for i := range nodes {
		n := &nodes[i]
		// A node opted out of mig-manager is let go where it stands, as
		// when migManager is turned off.
		if gating.IsGPUNode(n) && n.Labels[gpuv1.DeployLabel(string(state.MIGManager))] == gpuv1.LabelTrue {
			gpuNodes = append(gpuNodes, n)
		} else {
			others = append(others, *n)
		}
	}
	// What is applied stays known: a node that stops being a GPU node for
	// a while (NFD restarting) keeps it.
	forgotten := r.forgetMIG(ctx, others, false)
	configs, err := r.readMIGConfigs(ctx, spec)
	if err != nil {
		return migOut(gpuNodes), true, errors.Join(err, ignoreStale(forgotten))
	}
	out := migOut(gpuNodes)
	candidates := make([]migreconfig.Node, 0, len(gpuNodes))
	for _, n := range gpuNodes {
		st := migStateOf(n)
		desired := n.Labels[gpuv1.LabelMIGConfig]
		since, _ := time.Parse(time.RFC3339, n.Annotations[AnnotationMIGSince])
		// A node whose MIG devices are gone goes on while an upgrade or a
		// repair holds it, once it has replaced the driver: their
		// validation waits for its device plugin, which waits for the
		// devices.
		lost := gating.MIGDevicesLost(n)
		candidates = append(candidates, migreconfig.Node{
			Name: n.Name,
			Busy: migreconfig.Tainted(st) || held[n.Name],
			Waiting: st == gpuv1.MIGReconfigureRequired && nodeReady(n) && r.driverSettled(n) &&
				(!held[n.Name] || lost && !replacingDriver(n)) && configs.refusal(cp, n, desired) == "",
			Serving:      gating.ServesGPUs(n),
			Lost:         lost,
			WaitingSince: since,
		})
	}
	admitted, err := migreconfig.Admit(candidates, spec.MaxParallelOrDefault())
	if err != nil {
		return out, true, errors.Join(err, ignoreStale(forgotten))
	}
	sel, err := parseSelectors(&cp.Spec.Driver.UpgradePolicy)
	if err != nil {
		return out, true, errors.Join(err, ignoreStale(forgotten))
	}
	p := migPolicyOf(spec)
	next := make([]gpuv1.MIGReconfigureState, len(gpuNodes))
	// settling are the nodes waiting for their device plugin and GFD to
	// settle: no node event says when they have.
	settling := make([]bool, len(gpuNodes))
	errs := make([]error, len(gpuNodes))
	workqueue.ParallelizeUntil(ctx, stepWorkers, len(gpuNodes), func(i int) {
		n := gpuNodes[i]
		next[i] = migStateOf(n)
		f, err := r.migFacts(ctx, cp, obs, n, sel, configs)
		if err != nil {
			errs[i] = err
			return
		}
		f.Admitted = admitted[n.Name]
		step := migreconfig.Next(f, p)
		ctrl.LoggerFrom(ctx).V(1).Info("MIG reconfiguration step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
		next[i], errs[i] = r.takeMIG(ctx, cp, obs, n, f, step, sel, configs.partitions)
		settling[i] = f.InPlace == migreconfig.Unknown && next[i] == gpuv1.MIGReconfigureRequired
	})
	busy := errors.Is(forgotten, errStale)
	for i, n := range gpuNodes {
		switch {
		case errors.Is(errs[i], errStale):
			busy = true
		case errs[i] != nil:
			ctrl.LoggerFrom(ctx).Error(errs[i], "MIG reconfiguration step failed; retrying at the next look", "node", n.Name, "after", poll)
			busy = true
		}
		out[n.Name] = out[n.Name] || migreconfig.Tainted(next[i])
		busy = busy || migreconfig.InProgress(next[i]) || settling[i]
	}
	return out, busy, ignoreStale(forgotten)
}

// migOut returns the nodes a reconfiguration holds out of service, as the
// cache has them.
func migOut(nodes []*corev1.Node) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		out[n.Name] = migreconfig.Tainted(migStateOf(n))
	}
	return out
}

// migHeld reports whether a node's MIG reconfiguration keeps repairs and
// upgrades off it: under way or failed, or done so recently that the
// kubelet still shows the old resource unallocatable.
func migHeld(n *corev1.Node, now time.Time) bool {
	st := migStateOf(n)
	if migreconfig.Tainted(st) {
		return true
	}
	since, err := time.Parse(time.RFC3339, n.Annotations[AnnotationMIGSince])
	return st == gpuv1.MIGReconfigureDone && err == nil && now.Sub(since) < kubeletResourceGrace
}

// migFacts gathers what the reconfiguration's state machine needs about a
// node. Workload pods are listed live, and only while they are evicted.
func (r *Reconciler) migFacts(ctx context.Context, cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node,
	sel *podSelectors, configs migConfigs) (migreconfig.Facts, error) {
	a := n.Annotations
	f := migreconfig.Facts{
		State:      migStateOf(n),
		Now:        r.now(),
		Desired:    n.Labels[gpuv1.LabelMIGConfig],
		Applied:    a[gpuv1.AnnotationMIGApplied],
		Target:     a[AnnotationMIGTarget],
		ClientPods: o.migClients[n.Name],
		Lost:       gating.MIGDevicesLost(n),
	}
	f.Refused = configs.refusal(cp, n, f.Desired)
	f.Since, f.AttemptSince = f.Now, f.Now
	if t, err := time.Parse(time.RFC3339, a[AnnotationMIGSince]); err == nil {
		f.Since = t
	}
	if t, err := time.Parse(time.RFC3339, a[AnnotationMIGAttemptSince]); err == nil {
		f.AttemptSince = t
	}
	f.Attempt, _ = strconv.Atoi(a[AnnotationMIGAttempt])
	// Only the attempt's own pod speaks for it: one of an attempt before,
	// still terminating, may write a late result.
	if pod := o.migManagers[n.Name]; pod != nil && !pod.CreationTimestamp.Time.Before(f.AttemptSince) {
		f.ConfigState = n.Labels[gpuv1.LabelMIGConfigState]
	}
	switch f.State {
	case "", gpuv1.MIGReconfigureRequired, gpuv1.MIGReconfigureDone:
		if f.Applied == "" && f.Desired != "" && f.Refused == "" {
			f.InPlace = r.inPlace(cp, o, n, configs, f.Desired, f.Now)
		} else {
			f.InPlace = migreconfig.Differs
		}
	case gpuv1.MIGEviction:
		var err error
		f.GPUPods, err = r.countPods(ctx, n.Name, nil, r.isGPUPod(cp, sel.gpuExtra))
		return f, err
	case gpuv1.MIGValidation:
		f.Advertised, f.Mismatch = r.advertised(cp, o, n, configs, f)
	}
	return f, nil
}

// advertised judges what the node's device plugin advertises against the
// configuration applied, once its word counts: its state is ready again,
// and its pod, started after the apply, has been ready long enough for
// the kubelet to report allocatable.
func (r *Reconciler) advertised(cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node, configs migConfigs,
	f migreconfig.Facts) (migreconfig.Advertised, string) {
	if !cp.Spec.DevicePlugin.IsEnabled() || n.Labels[gpuv1.DeployLabel(string(state.DevicePlugin))] != gpuv1.LabelTrue {
		return migreconfig.Matches, "" // nothing advertises: nothing to check
	}
	pod := o.pluginPods[n.Name]
	if gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) != gpuv1.StateReady ||
		pod == nil || !pod.Ready || pod.ReadySince.Before(f.Since) || f.Now.Before(pod.ReadySince.Add(gating.HealthSettle)) {
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
// configuration already, once its device plugin and GFD have settled
// (Unknown until then): it advertises exactly what the configuration
// makes where GFD counted whole GPUs (MIG disabled already, as NVIDIA's
// default all-disabled has it), or, on a node partitioned already, it
// has mig-manager's word for it (a person's label, as NVIDIA's operator
// leaves it, and nvidia.com/mig.config.state=success) and advertises the
// configuration's MIG devices. Enabling migManager then restarts nothing
// on such nodes.
func (r *Reconciler) inPlace(cp *gpuv1.ClusterPolicy, o *observed, n *corev1.Node, configs migConfigs, config string,
	now time.Time) migreconfig.Advertised {
	if configs.file == nil || configs.file.Filtered(config) || !cp.Spec.GFD.IsEnabled() ||
		gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))]) != gpuv1.StateReady {
		return migreconfig.Differs // not serving, or not knowable
	}
	if pod := o.pluginPods[n.Name]; pod == nil || !pod.Ready || now.Before(pod.ReadySince.Add(gating.HealthSettle)) ||
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
	c, err := strconv.Atoi(n.Labels["nvidia.com/gpu.count"])
	if err != nil || c < 0 {
		return 0
	}
	return c
}

// driverSettled reports whether mig-manager's prerequisites (the driver,
// the toolkit) are ready on the node: an apply started before would run
// its timeout while mig-manager waits for them, a slow driver build
// failing the node.
func (r *Reconciler) driverSettled(n *corev1.Node) bool {
	for _, p := range r.Graph.Prerequisites(state.MIGManager) {
		if v := gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(p))]); v != gpuv1.StateReady && v != gpuv1.StateDisabled {
			return false
		}
	}
	return true
}

// replacingDriver reports whether the upgrade or the repair holding the
// node has yet to replace its driver pod: MIG devices created before
// would be destroyed again.
func replacingDriver(n *corev1.Node) bool {
	switch stateOf(n) {
	case gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs, gpuv1.UpgradePodDeletion, gpuv1.UpgradeDrainRequired,
		gpuv1.UpgradePodRestart:
		return true
	}
	return remediation.ReloadsDriver(remediationStateOf(n))
}

func migStateOf(n *corev1.Node) gpuv1.MIGReconfigureState {
	return gpuv1.MIGReconfigureState(n.Labels[gpuv1.LabelMIGReconfigureState])
}

func migPolicyOf(spec *gpuv1.MIGManagerSpec) migreconfig.Policy {
	return migreconfig.Policy{
		EvictionTimeout:   time.Duration(spec.EvictionTimeout()) * time.Second,
		ApplyTimeout:      time.Duration(spec.ApplyTimeout()) * time.Second,
		ValidationTimeout: time.Duration(spec.ValidationTimeout()) * time.Second,
	}
}

// repairOrUpgrade reports whether a repair or a driver upgrade holds the
// node (a failed upgrade too, which a person has to look at): no
// reconfiguration starts on it, and it takes a place in the budget.
func repairOrUpgrade(n *corev1.Node) bool {
	return remediation.InProgress(remediationStateOf(n)) || remediation.Tainted(remediationStateOf(n)) ||
		upgrade.InProgress(stateOf(n)) || stateOf(n) == gpuv1.UpgradeFailed
}
