package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// stepWorkers is how many nodes take their steps at once in one look at
// the fleet.
const stepWorkers = 16

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// SliceReader summarises a node's ResourceSlices of NVIDIA's DRA driver
// (draslices.Index).
type SliceReader interface {
	OnNode(node string) (*draslices.Node, error)
}

// Reconciler moves GPU nodes through the operations that take them out of
// service.
type Reconciler struct {
	// Client reads nodes from the cache and writes.
	Client client.Client
	// Nodes lists the fleet at each look (cacheconfig.CachedNodes: the
	// cache's own nodes, no copy of each); nil lists through Client.
	Nodes cacheconfig.NodeLister
	// Pods are the operand pods.
	Pods *operandpods.Index
	// Slices are the DRA driver's ResourceSlices, by node: the health of
	// the GPUs of nodes in allocation mode dra. Nil where the API server
	// does not serve them.
	Slices SliceReader
	// APIReader lists a node's workload pods live, only for nodes in a
	// step that needs them: no cluster-wide pod cache.
	APIReader client.Reader
	// TrimNode, where set, keeps of a node this controller wrote what the
	// cache keeps of it (cacheconfig.NodeTrimmer): the nodes it holds until
	// the cache has them (writes) then cost what cached ones do. The first
	// look of an upgrade writes every node of the fleet; whole, with their
	// managed fields and every label's own strings, they were the largest
	// single part of the operator's memory at its peak (9.5 of 41.3 MB in
	// use, 1000 nodes).
	TrimNode  func(*corev1.Node) *corev1.Node
	Graph     *state.Graph
	Namespace string
	Recorder  events.EventRecorder
	Metrics   *metrics.Metrics
	// Timers are the waits of the machines: how often nodes in a step are
	// looked at again (GPU pods are listed live, not watched, and
	// timeouts run), the device plugin's settle time, the timeouts.
	Timers timers.Timers
	Now    func() time.Time

	// lastLook is how long the last look at the fleet took, in
	// nanoseconds: events on nodes in a step wait twice that.
	lastLook atomic.Int64
	// written holds the nodes this process wrote until the cache has
	// them: each look decides on the fleet as this process left it.
	written writes
	// primed is set once the first look has read live the nodes the
	// cache had older than the API server.
	primed atomic.Bool
	// looks keeps the quiet nodes' judgements between looks.
	looks lookCache
}

// Reconcile looks at the whole fleet once: every GPU node of the active
// policy takes one step of each operation that runs on it, as the
// arbiter lets it, within the budgets.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (result ctrl.Result, err error) {
	start := time.Now()
	defer func() {
		r.lastLook.Store(int64(time.Since(start)))
		r.Metrics.Reconciles.WithLabelValues("maintenance", metrics.Result(err)).Inc()
	}()
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Read-only: the cache's objects, not copies of them.
	cached, err := cacheconfig.ListNodes(ctx, r.Nodes, r.Client)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	obs, err := r.observe(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	p, err := r.newPass(ctx, active, obs)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !r.primed.Load() {
		// A standby that takes over holds a cache that may not have the
		// last writes of the leader before it: its first look reads
		// those nodes live.
		if err := r.prime(ctx, cached); err != nil {
			return ctrl.Result{}, err
		}
		r.primed.Store(true)
	}
	all, replaced := r.written.current(cached)
	if replaced > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("reading nodes as this controller wrote them: the cache has not seen those writes yet", "nodes", replaced)
	}
	full := r.looks.begin(p, r.Timers.MaintenanceFullLook)
	// Each operation lets go of the nodes it no longer runs on: no
	// policy, the operation turned off, the node opted out. A node whose
	// judgement the look cache keeps was let go by the look that made it.
	var nodes []candidate
	var errs []error
	listed := make(map[string]bool, len(all))
	for _, n := range all {
		listed[n.Name] = true
		pods := obs.podKeyOf(n.Name)
		if j := r.looks.lookup(n, pods); j != nil {
			if j.runs != 0 {
				nodes = append(nodes, candidate{node: n, pods: pods, cached: j, letGo: true})
			}
			continue
		}
		r.looks.forget(n.Name)
		var runs uint8
		letGo := true
		for i, m := range p.machines {
			if m.runs(p, n) {
				runs |= 1 << i
			} else if err := m.forget(ctx, p, n); err != nil {
				errs = append(errs, err)
				letGo = false
			}
		}
		switch {
		case runs != 0:
			nodes = append(nodes, candidate{node: n, pods: pods, runs: runs, letGo: letGo})
		case n.Annotations[gpuv1.AnnotationMaintenanceWaiting] != "":
			errs = append(errs, r.tellWaiting(ctx, n, ""))
		case letGo:
			// No machine runs there, and each let it go: the same node,
			// with the same pods, is let go alike at the next look.
			// (Should the cache still show it from before a mark's
			// removal, forget would only remove it again.)
			r.looks.keep(n, &kept{pods: pods})
		}
	}
	r.looks.prune(listed)
	busy, judgedNow := r.step(ctx, p, nodes)
	if logs := ctrl.LoggerFrom(ctx).V(1); logs.Enabled() {
		logs.Info("maintenance look", "full", full, "nodes", len(nodes), "judged", judgedNow)
	}
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, errStale):
			busy = true
		default:
			busy = true
			ctrl.LoggerFrom(ctx).Error(err, "letting a node go")
		}
	}
	if active != nil {
		r.export(active, p.tally.snapshot())
	}
	if busy {
		return ctrl.Result{RequeueAfter: r.Timers.MaintenancePoll}, nil
	}
	return ctrl.Result{}, nil
}

// candidate is a node some machine runs on, and its judgement the look
// cache keeps, if any; runs are its machines when it has none.
type candidate struct {
	node   *corev1.Node
	pods   podKey
	cached *kept
	runs   uint8
	// letGo is false where an operation that no longer runs there failed
	// to remove its marks: the next look tries again.
	letGo bool
}

// step admits the starts of this look and steps every node, its machines
// in the arbiter's order, the nodes side by side; a node whose judgement
// the look cache keeps, and which Admit lets start nothing, keeps its
// outcome. It reports whether any node is on its way, and how many nodes
// it judged.
func (r *Reconciler) step(ctx context.Context, p *pass, nodes []candidate) (bool, int) {
	if len(nodes) == 0 {
		return false, 0
	}
	views := make([]arbiter.Node, len(nodes))
	for i, c := range nodes {
		if c.cached != nil {
			views[i] = c.cached.view
		} else {
			views[i] = p.viewOf(ctx, c.node, c.runs)
		}
	}
	admission, budgetErrs := arbiter.Admit(views, p.budgets)
	for _, err := range budgetErrs {
		// A budget stored before the API server refused it holds back
		// the starts it covers, and says so on the policy.
		ctrl.LoggerFrom(ctx).Error(err, "maintenance cannot start where this budget applies")
		r.Recorder.Eventf(p.cp, nil, corev1.EventTypeWarning, "MaintenanceBlocked", "Admit", "%v", err)
	}
	busy := make([]bool, len(nodes))
	fresh := make([]*kept, len(nodes))
	stepped := make([]bool, len(nodes))
	workqueue.ParallelizeUntil(ctx, stepWorkers, len(nodes), func(i int) {
		c := &nodes[i]
		admitted, ok := admission.Admitted[c.node.Name]
		if !ok {
			admitted = arbiter.None
		}
		if j := c.cached; j != nil && admitted == arbiter.None {
			if j.counted {
				p.tally.count(j.upgrade)
			}
			busy[i] = j.busy
			r.tellWaitingOrLog(ctx, c.node, admission.Waiting[c.node.Name])
			return
		}
		runs := c.runs
		if c.cached != nil {
			runs = c.cached.runs
		}
		var settled bool
		stepped[i] = true
		busy[i], settled = r.stepNode(ctx, p, c.node, runs, &views[i], admitted, admission.Waiting[c.node.Name])
		if settled && c.letGo && admitted == arbiter.None && quiet(p, c.node, runs) {
			fresh[i] = &kept{pods: c.pods, runs: runs, view: views[i], busy: busy[i],
				upgrade: stateOf(c.node), counted: p.runs(arbiter.DriverUpgrade, runs)}
		}
	})
	onTheWay, judgedNow := false, 0
	for i, b := range busy {
		onTheWay = onTheWay || b
		if stepped[i] {
			judgedNow++
		} else {
			r.looks.reused++
		}
		if fresh[i] != nil {
			r.looks.keep(nodes[i].node, fresh[i])
		}
	}
	return onTheWay, judgedNow
}

// stepNode takes one step of each machine that runs on the node, each
// write conditional on the node as the one before left it, then writes
// why it waits. It reports whether the node is on its way, and whether its
// steps wrote nothing and failed nowhere: the same node gets the same
// steps again (lookCache).
func (r *Reconciler) stepNode(ctx context.Context, p *pass, n *corev1.Node, runs uint8, view *arbiter.Node,
	admitted arbiter.Operation, waiting string) (busy, settled bool) {
	cur := n
	for i, m := range p.machines {
		if runs&(1<<i) == 0 {
			continue
		}
		out, err := m.step(ctx, p, cur, turn{op: m.operation(), started: admitted, view: view})
		switch {
		case errors.Is(err, errStale):
			// Decided on a node that changed since: the next look decides
			// again, on the node as it is then.
			return true, false
		case err != nil:
			// One node's trouble (an API error, a refused write) is
			// retried at the next look, with the rest of the fleet:
			// returned, it would put every node in the controller's
			// backoff.
			ctrl.LoggerFrom(ctx).Error(err, "maintenance step failed; retrying at the next look", "node", n.Name,
				"operation", m.operation().String(), "after", r.Timers.MaintenancePoll)
			return true, false
		}
		cur = out.node
		busy = busy || out.busy
	}
	r.tellWaitingOrLog(ctx, cur, waiting)
	return busy, cur == n
}

// tellWaitingOrLog writes why the node waits, and logs a failure: the
// next look writes it again.
func (r *Reconciler) tellWaitingOrLog(ctx context.Context, n *corev1.Node, why string) {
	if err := r.tellWaiting(ctx, n, why); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "writing why the node waits", "node", n.Name)
	}
}

// verbose is the V(1) logger of a machine's step, and whether it logs:
// a step builds its log's arguments (the node's facts, boxed) only when it
// does, which each look would otherwise do for every node and machine.
func verbose(ctx context.Context) (logr.Logger, bool) {
	l := logr.FromContextOrDiscard(ctx).V(1)
	return l, l.Enabled()
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
