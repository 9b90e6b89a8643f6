package upgrade

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// FieldOwner manages the upgrade label and annotations, apart from the node
// controller's labels.
const FieldOwner = "gpu-operator-upgrade"

// Annotations of a node's upgrade.
const (
	// AnnotationSince is when the node entered its upgrade state.
	AnnotationSince = gpuv1.UpgradeAnnotationPrefix + "since"
	// AnnotationCordoned is set when the upgrade cordoned the node; a node
	// cordoned before stays cordoned after.
	AnnotationCordoned = gpuv1.UpgradeAnnotationPrefix + "cordoned"
)

// upgradeEvent is the reason of the events on a node's upgrade.
const upgradeEvent = "GPUDriverUpgrade"

// poll is how often nodes in an upgrade are looked at again: GPU pods are
// listed live, not watched, and timeouts run.
const poll = 5 * time.Second

// stepWorkers is how many nodes take their step at once in one look at the
// fleet.
const stepWorkers = 16

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// Reconciler moves GPU nodes through driver upgrades.
type Reconciler struct {
	// Client reads nodes from the cache and writes.
	Client client.Client
	// Pods are the operand pods.
	Pods *operandpods.Index
	// APIReader lists a node's workload pods live, only for nodes in an
	// upgrade step that needs them: no cluster-wide pod cache.
	APIReader client.Reader
	Graph     *state.Graph
	Namespace string
	Recorder  events.EventRecorder
	Metrics   *metrics.Metrics
	Now       func() time.Time

	// lastLook is how long the last look at the fleet took, in
	// nanoseconds: events on upgrading nodes wait twice that.
	lastLook atomic.Int64
}

// Reconcile takes one step for every GPU node of the active policy.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (result ctrl.Result, err error) {
	start := time.Now()
	defer func() {
		r.lastLook.Store(int64(time.Since(start)))
		r.Metrics.Reconciles.WithLabelValues("upgrade", metrics.Result(err)).Inc()
	}()
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Lists here are read-only: the cache's objects, not copies of them.
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	obs, err := r.observe(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Repairs step first: a node they take out of service this look is
	// one upgrades count against their budget and do not admit.
	remediating, busy, err := r.remediate(ctx, active, obs, nodes.Items)
	errs := []error{err}
	// MIG reconfigurations step next, never on a node a repair or an
	// upgrade holds; the nodes they hold, repairs' and upgrades' budgets
	// count, and no upgrade starts on them.
	if remediating == nil {
		remediating = map[string]bool{}
	}
	held := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		held[n.Name] = remediating[n.Name] || repairOrUpgrade(n)
	}
	reconfiguring, migBusy, err := r.reconfigureMIG(ctx, active, obs, nodes.Items, held)
	errs = append(errs, err)
	busy = busy || migBusy
	for name, out := range reconfiguring {
		remediating[name] = remediating[name] || out
	}
	if active == nil || !active.Spec.Driver.IsEnabled() {
		errs = append(errs, r.forgetAll(ctx, nodes.Items), r.deleteOrphans(ctx, obs, nodes.Items))
		if busy {
			return ctrl.Result{RequeueAfter: poll}, errors.Join(errs...)
		}
		return ctrl.Result{}, errors.Join(errs...)
	}
	pools := map[string][]*corev1.Node{}
	var stale []corev1.Node
	for i := range nodes.Items {
		n := &nodes.Items[i]
		// Nodes on their host's driver have no driver to upgrade; one that
		// moved there mid-upgrade is let go (uncordoned) here.
		if !gating.IsGPUNode(n) || n.Labels[gpuv1.DeployLabel(string(state.Driver))] != gpuv1.LabelTrue ||
			n.Labels[gpuv1.LabelDriverRoot] == string(gpuv1.DriverRootHost) {
			stale = append(stale, *n)
			continue
		}
		pool := driver.PoolOf(&active.Spec.Driver, n.Labels)
		pools[pool] = append(pools[pool], n)
	}
	tally := tally{}
	for pool, members := range pools {
		b, err := r.reconcilePool(ctx, active, obs, members, remediating, &tally)
		busy = busy || b
		if err != nil {
			// A pool that cannot step (an invalid budget or selector stored
			// before the API server refused them) holds back its own nodes
			// only, and says so on the policy.
			ctrl.LoggerFrom(ctx).Error(err, "driver upgrades of a pool cannot proceed", "pool", pool)
			r.Recorder.Eventf(active, nil, corev1.EventTypeWarning, "GPUDriverUpgradeBlocked", "Upgrade",
				"driver pool %s: %v", pool, err)
			busy = true
		}
	}
	errs = append(errs, r.forgetAll(ctx, stale), r.deleteOrphans(ctx, obs, stale))
	r.export(active, tally)
	if busy {
		return ctrl.Result{RequeueAfter: poll}, errors.Join(errs...)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// reconcilePool admits nodes within the pool's budget and steps each node.
// It reports whether any node is on its way.
func (r *Reconciler) reconcilePool(ctx context.Context, cp *gpuv1.ClusterPolicy, obs *observed,
	nodes []*corev1.Node, remediating map[string]bool, t *tally) (bool, error) {
	spec := &cp.Spec.Driver.UpgradePolicy
	p := policyOf(spec)
	candidates := make([]upgrade.Node, 0, len(nodes))
	for _, n := range nodes {
		st := stateOf(n)
		candidates = append(candidates, upgrade.Node{
			Name:        n.Name,
			State:       st,
			Unavailable: n.Spec.Unschedulable || !nodeReady(n),
			Remediating: remediating[n.Name],
			Waiting: st == gpuv1.UpgradeRequired && p.AutoUpgrade && n.Labels[gpuv1.LabelUpgradeSkip] != gpuv1.LabelTrue &&
				!remediating[n.Name],
		})
	}
	admitted, err := upgrade.Admit(candidates, *spec.MaxParallelUpgrades, *spec.MaxUnavailable)
	if err != nil {
		return false, err
	}
	sel, err := parseSelectors(spec)
	if err != nil {
		return false, err
	}
	// Once admission is decided, nodes step independently; their API calls
	// (live pod lists, evictions, writes) run side by side, so that a wave
	// of upgrades is not a queue of round trips.
	next := make([]gpuv1.UpgradeState, len(nodes))
	stepped := make([]bool, len(nodes))
	errs := make([]error, len(nodes))
	workqueue.ParallelizeUntil(ctx, stepWorkers, len(nodes), func(i int) {
		n := nodes[i]
		f, err := r.facts(ctx, cp, obs, n, sel)
		if err != nil {
			errs[i] = err
			return
		}
		f.Admitted = admitted[n.Name]
		step := upgrade.Next(f, p)
		ctrl.LoggerFrom(ctx).V(1).Info("upgrade step", "node", n.Name, "state", f.State, "next", step.Next,
			"action", step.Action.String(), "facts", f)
		next[i], errs[i] = r.take(ctx, cp, obs, n, f, step, sel)
		stepped[i] = true
	})
	busy := false
	for i := range nodes {
		if errs[i] != nil {
			// One node's trouble (an API error, a refused write) is retried
			// at the next look, with the rest of the fleet: returned, it
			// would put every node's upgrade in the controller's backoff.
			ctrl.LoggerFrom(ctx).Error(errs[i], "upgrade step failed; retrying at the next look", "node", nodes[i].Name, "after", poll)
			busy = true
		}
		if !stepped[i] { // no facts: not counted, retried
			continue
		}
		t.count(next[i])
		busy = busy || upgrade.InProgress(next[i]) || next[i] == gpuv1.UpgradeRequired
	}
	return busy, nil
}

// take performs a step's action and records the node's next state. A failed
// action leaves the state as it is, to be retried.
func (r *Reconciler) take(ctx context.Context, cp *gpuv1.ClusterPolicy, obs *observed, n *corev1.Node,
	f upgrade.Facts, step upgrade.Step, sel *podSelectors) (gpuv1.UpgradeState, error) {
	spec := &cp.Spec.Driver.UpgradePolicy
	cordoned := n.Annotations[AnnotationCordoned] == gpuv1.LabelTrue
	var err error
	switch step.Action {
	case upgrade.Cordon:
		// The upgrade holds the cordon only if the node was schedulable:
		// a node cordoned by someone before stays cordoned after.
		cordoned = cordoned || !n.Spec.Unschedulable
	case upgrade.EvictGPUPods:
		err = r.evict(ctx, n, upgradeEvent, r.isGPUPod(cp, sel.gpuExtra), spec.PodDeletion.Force, spec.PodDeletion.DeleteEmptyDir)
	case upgrade.Drain:
		err = r.evict(ctx, n, upgradeEvent, r.isDrainable(sel.drain), spec.Drain.Force, spec.Drain.DeleteEmptyDir)
	case upgrade.DeleteDriverPod:
		err = r.deleteDriverPod(ctx, &cp.Spec.Driver, n, obs)
	case upgrade.Uncordon:
		cordoned = false
	}
	if err != nil {
		return f.State, fmt.Errorf("node %s, %s: %w", n.Name, step.Action, err)
	}
	if step.Next == f.State && cordoned == (n.Annotations[AnnotationCordoned] == gpuv1.LabelTrue) {
		return f.State, nil
	}
	if written, err := r.write(ctx, n, step.Next, cordoned, f); !written {
		return f.State, err
	}
	if step.Next != f.State {
		kind := corev1.EventTypeNormal
		if step.Next == gpuv1.UpgradeFailed {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(n, nil, kind, upgradeEvent, "Upgrade", "%s -> %s: %s", displayState(f.State), step.Next, step.Reason)
	}
	return step.Next, nil
}

// write applies the node's upgrade label and annotations, and the cordon
// while the upgrade holds it, in one request on the version of the node the
// step was decided from: a decision taken on a stale cache (a second
// reconcile before the first one's write arrived) fails with a conflict and
// is taken again, rather than undoing what the first wrote. Server-side
// apply uncordons by dropping the field: if someone else cordoned the node
// meanwhile, their cordon stays.
func (r *Reconciler) write(ctx context.Context, n *corev1.Node, st gpuv1.UpgradeState, cordoned bool, f upgrade.Facts) (bool, error) {
	name := n.Name
	since := f.Since
	if st != f.State {
		since = f.Now
	}
	annotations := map[string]string{AnnotationSince: since.UTC().Format(time.RFC3339)}
	if cordoned {
		annotations[AnnotationCordoned] = gpuv1.LabelTrue
	}
	labels := map[string]string{}
	if st != "" {
		labels[gpuv1.LabelUpgradeState] = string(st)
	}
	ac := corev1ac.Node(name).WithResourceVersion(n.ResourceVersion).WithLabels(labels).WithAnnotations(annotations)
	if cordoned {
		ac.WithSpec(corev1ac.NodeSpec().WithUnschedulable(true))
	}
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil // decided on a stale node: the watch brings it back fresh
		}
		return false, fmt.Errorf("writing the upgrade state of node %s: %w", name, err)
	}
	return true, nil
}

// forgetAll removes the upgrade label and annotations from nodes that have
// them but are no longer upgraded by the operator.
func (r *Reconciler) forgetAll(ctx context.Context, nodes []corev1.Node) error {
	var errs []error
	for i := range nodes {
		n := &nodes[i]
		_, labelled := n.Labels[gpuv1.LabelUpgradeState]
		_, since := n.Annotations[AnnotationSince]
		if !labelled && !since {
			continue
		}
		// An empty apply drops the label, the annotations and the cordon
		// the upgrade held.
		ac := corev1ac.Node(n.Name)
		errs = append(errs, client.IgnoreNotFound(r.Client.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership)))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func stateOf(n *corev1.Node) gpuv1.UpgradeState {
	return gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState])
}

func displayState(s gpuv1.UpgradeState) string {
	if s == "" {
		return "up to date"
	}
	return string(s)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func policyOf(spec *gpuv1.DriverUpgradePolicySpec) upgrade.Policy {
	seconds := func(p *int32) time.Duration {
		if p == nil {
			return 0
		}
		return time.Duration(*p) * time.Second
	}
	return upgrade.Policy{
		AutoUpgrade:        spec.AutoUpgrade == nil || *spec.AutoUpgrade,
		WaitTimeout:        seconds(spec.WaitForCompletion.TimeoutSeconds),
		PodDeletionTimeout: seconds(spec.PodDeletion.TimeoutSeconds),
		DrainEnabled:       spec.Drain.Enable != nil && *spec.Drain.Enable,
		DrainTimeout:       seconds(spec.Drain.TimeoutSeconds),
	}
}
