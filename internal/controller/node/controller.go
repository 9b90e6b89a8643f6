package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=apps,namespace=gpu-operator,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=nvidia.com,resources=clusterpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=nvidia.com,resources=nvidiadrivers,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=get;list;watch

// Reconciler keeps each node's operator labels in line with the operand
// pods on it.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Pods are the operand pods, by node.
	Pods *operandpods.Index
	// Slices are the DRA driver's ResourceSlices, by node; nil where the
	// API server does not serve them.
	Slices    *draslices.Index
	Graph     *state.Graph
	Namespace string
	// Timers are the waits of the node's decisions: the grace period, the
	// device plugin's settle time, the rechecks.
	Timers     timers.Timers
	Recorder   events.EventRecorder
	Metrics    *metrics.Metrics
	FieldOwner string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// WorkloadProofs bounds the CUDA workload pods running at once;
	// DefaultWorkloadProofs when zero.
	WorkloadProofs int

	// configs remembers the device plugin's files as last judged.
	configs pluginconfig.Judge
	// written remembers the versions of nodes this process wrote on
	// until the cache shows the write.
	written ownWrites
	// workloads bounds the CUDA workload pods running at once.
	workloads workloadStarts
}

// Reconcile judges one node and writes its labels when they changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	defer func() { r.Metrics.Reconciles.WithLabelValues("node", metrics.Result(err)).Inc() }()
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.written.forget(req.Name)
		// A CUDA workload pod pinned to a node that is gone (on a DRA
		// node, made unbound for the scheduler) would wait for ever,
		// holding a place of the bound: the pod garbage collector deletes
		// only pods bound to a node. An operator restarted after the node
		// went gets here too, from the pod's event.
		return ctrl.Result{}, r.deleteStalePods(ctx, req.Name, []state.Name{state.CUDAWorkload})
	}
	if r.written.behind(node) {
		// The cache has not caught up with this process's last write of
		// the node: a decision on it could only be refused.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	in, err := r.input(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	decision := gating.Decide(in)
	if decision.Labels == nil {
		// Not a node the operator serves (no policy, or no GPU node any
		// more): a CUDA workload pod made for it goes, one waiting for
		// the scheduler included, which would otherwise wait for ever.
		decision.StalePods = []state.Name{state.CUDAWorkload}
	}
	if decision.Labels[gpuv1.LabelDevicePluginConfigInUse] != node.Labels[gpuv1.LabelDevicePluginConfigInUse] {
		// The configuration is to change: it waits for the node's GPU
		// pods, counted live, only now.
		if in.GPUPods, err = r.gpuPodsOn(ctx, node.Name); err != nil {
			return ctrl.Result{}, err
		}
		decision = gating.Decide(in)
	}
	// The readiness taint goes on before the labels that take a state
	// from ready, and comes off only after the labels that make every
	// state ready: no version of the node is untainted with a state not
	// ready, when the scheduler could place a GPU pod there. A taint the
	// API server refuses (an admission policy on node taints) must not
	// stop the labels, which gate every operand: they are written, and
	// the refusal is told and tried again.
	var taintErr error
	if decision.ReadinessTaint {
		var done bool
		if done, taintErr = r.syncReadinessTaint(ctx, node, true); taintErr == nil && !done {
			// Not written: the node changed since it was read.
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
	}
	if needsWrite(node, decision) {
		written, err := r.write(ctx, node, decision)
		if err != nil || !written {
			// Not written: decided on a node that changed since. Decide
			// again on the fresh one (a status-only change brings no event).
			return ctrl.Result{RequeueAfter: staleRetry}, err
		}
		r.record(ctx, node, decision)
	}
	if !decision.ReadinessTaint {
		var done bool
		if done, taintErr = r.syncReadinessTaint(ctx, node, false); taintErr == nil && !done {
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
	}
	if err := r.deleteStalePods(ctx, node.Name, decision.StalePods); err != nil {
		return ctrl.Result{}, err
	}
	if decision.Workload != nil {
		wait, err := r.startWorkload(ctx, in.Policy, node, decision.Workload)
		if err != nil {
			return ctrl.Result{}, err
		}
		if wait && (decision.RequeueAfter == 0 || r.Timers.WorkloadSlotPoll < decision.RequeueAfter) {
			decision.RequeueAfter = r.Timers.WorkloadSlotPoll
		}
	}
	if taintErr != nil {
		log.FromContext(ctx).Error(taintErr, "readiness taint refused")
		r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "ReadinessTaintRefused", "Reconcile", "%v", taintErr)
		// Tried again without the growing backoff of an error, which
		// would hold back the decision's own grace-period timers.
		retry := r.Timers.TaintRetry
		if d := decision.RequeueAfter; d > 0 && d < retry {
			retry = d
		}
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	return ctrl.Result{RequeueAfter: decision.RequeueAfter}, nil
}

// input gathers what the decision on a node reads, from the cache.
func (r *Reconciler) input(ctx context.Context, node *corev1.Node) (gating.Input, error) {
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return gating.Input{}, err
	}
	in := gating.Input{Graph: r.Graph, Node: node, Policy: active, Grace: r.Timers.ReadyGrace, NFDGrace: r.Timers.NFDGrace,
		HealthSettle: r.Timers.HealthSettle, GPUPodsRecheck: r.Timers.GPUPodsRecheck, WorkloadRetry: r.Timers.WorkloadRetry, Now: r.now()}
	if active != nil && gating.IsGPUNode(node) {
		in.Enabled = r.Graph.Enabled(&active.Spec)
		pools, err := driverpool.Load(ctx, r.Client, active, r.Pods)
		if err != nil {
			return gating.Input{}, err
		}
		a := pools.Assign(node.Name, node.Labels)
		in.DriverPool, in.DriverKernel, in.DriverAwaitsImage = a.Pool, a.WantedKernel(node.Labels), a.AwaitsImage
		in.DriverPoolsFromNVIDIADrivers = pools.FromNVIDIADrivers
		in.DriverImageMissing = a.ImageMissing
		in.AllocationMode, in.DRAServed, in.GPUCluster = a.Mode, r.Slices != nil, pools.GPUCluster
		in.DRADynamicMIG = pools.DRADriverFor(active).DynamicMIG()
		if r.Slices != nil {
			if in.DRA, err = r.Slices.OnNode(node.Name); err != nil {
				return gating.Input{}, err
			}
		}
		in.DriverNeedsOS = pools.NeedsOS(node.Name, node.Labels)
		in.DriverRestartGrace = r.Timers.DriverRestartGrace
		if in.Pods, in.DriverUnloading, in.DriverRestartDigest, err = r.observePods(ctx, node.Name, in.Now); err != nil {
			return gating.Input{}, err
		}
		if j, ok := r.devicePluginConfigs(ctx, active); ok {
			in.DevicePluginConfigs, in.MPSConfigs, in.KeptDevicePluginConfigs, in.CopiedDevicePluginConfigs = j.Problems, j.MPSNames, j.KeptNames, j.Copied
		}
	}
	return in, nil
}

// devicePluginConfigs judges the files devicePlugin.config's ConfigMap
// holds against the validated copies the operator keeps: each file with
// why the operator cannot run it (none when the ConfigMap does not exist),
// the configurations sharing GPUs with MPS, those that run from their last
// good copy, and those the copy holds. False when the policy names no
// ConfigMap, or one cannot be read: a node then keeps the configuration
// it runs.
func (r *Reconciler) devicePluginConfigs(ctx context.Context, cp *gpuv1.ClusterPolicy) (*pluginconfig.Judgement, bool) {
	cfg := cp.Spec.DevicePlugin.Config
	if cfg == nil || cfg.Name == "" {
		return nil, false
	}
	var read [2]*corev1.ConfigMap
	for i, name := range []string{cfg.Name, pluginconfig.ValidatedConfigMap} {
		cm := &corev1.ConfigMap{}
		switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, cm); {
		case apierrors.IsNotFound(err):
		case err != nil:
			ctrl.LoggerFrom(ctx).Error(err, "reading the device plugin's configurations", "configMap", name)
			return nil, false
		default:
			read[i] = cm
		}
	}
	return r.configs.Judge(read[0], read[1], cp.Spec.MIG.StrategyOrDefault() == gpuv1.MIGStrategyMixed), true
}

// Explain says why each state is not ready on a node, deciding as a
// reconcile would, without writing anything.
func (r *Reconciler) Explain(ctx context.Context, node *corev1.Node) (map[state.Name]string, error) {
	in, err := r.input(ctx, node)
	if err != nil {
		return nil, err
	}
	return gating.Decide(in).Why, nil
}

// staleRetry is how soon a node is judged again after its write met a newer
// version of it.
const staleRetry = 200 * time.Millisecond

// write applies every label and annotation the operator wants on the node.
// Server-side apply removes the ones it set before and no longer wants, and
// never touches another manager's. The node's resourceVersion is a
// precondition: with forced ownership, a decision taken before a user set
// a deploy label would otherwise overwrite the user's value. It reports
// whether it wrote; a conflict or a deleted node is no error.
func (r *Reconciler) write(ctx context.Context, node *corev1.Node, d gating.Result) (bool, error) {
	before := node.ResourceVersion
	ac := corev1ac.Node(node.Name).WithResourceVersion(before).WithLabels(d.Labels).WithAnnotations(d.Annotations)
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(r.FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("applying the labels of node %s: %w", node.Name, err)
	}
	log.FromContext(ctx).V(1).Info("node labels written", "labels", d.Labels)
	// The taint written next is conditional on this version.
	if ac.ResourceVersion != nil {
		node.ResourceVersion = *ac.ResourceVersion
	}
	// An apply that changed nothing (a state label only another manager
	// set, which it cannot remove) left the version as it was: the cache
	// has it already.
	if node.ResourceVersion != before {
		r.written.wrote(node.Name, before)
	}
	return true, nil
}

func (r *Reconciler) record(ctx context.Context, node *corev1.Node, d gating.Result) {
	for _, e := range d.Events {
		kind := corev1.EventTypeNormal
		if e.Warning {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(node, nil, kind, e.Reason, "Reconcile", "%s", e.Message)
		log.FromContext(ctx).Info(e.Message, "reason", e.Reason)
	}
	if d.BecameReady && d.ReadyAfter > 0 {
		r.Metrics.NodeReadySeconds.Observe(d.ReadyAfter.Seconds())
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// needsWrite reports whether the node's labels or annotations differ from
// what the decision wants. State labels and operator annotations belong to
// the operator alone, so any extra one means a write is needed too.
func needsWrite(node *corev1.Node, d gating.Result) bool {
	return differs(node.Labels, d.Labels, func(k string) bool {
		return hasPrefix(k, gpuv1.StateLabelPrefix) || k == gpuv1.LabelDevicePluginConfigInUse || k == gpuv1.LabelDriverKernel
	}) || differs(node.Annotations, d.Annotations, func(k string) bool { return hasPrefix(k, gpuv1.OperatorAnnotationPrefix) })
}

// differs reports whether have lacks or differs from any of want, or holds
// one of the operator's own that want no longer has.
func differs(have, want map[string]string, own func(string) bool) bool {
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			return true
		}
	}
	for k := range have {
		if _, wanted := want[k]; !wanted && own(k) {
			return true
		}
	}
	return false
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }
