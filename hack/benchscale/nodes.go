package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// goal is what a phase waits for on each node. It is called under the
// tracker's lock, in event order, so a goal may keep state (a reboot goal
// remembers which nodes it has seen reset).
type goal func(n *corev1.Node) bool

// nodeTracker follows the GPU nodes through an informer and records, for
// the current goal, since when each node has met it.
type nodeTracker struct {
	mu    sync.Mutex
	nodes map[string]*corev1.Node
	goal  goal
	// metSince: when each node last started meeting the goal; absent while
	// it does not.
	metSince map[string]time.Time
	// explain, when set, says why nodes have not met the goal yet: the
	// simulator's reason apart from the operator's.
	explain func(ctx context.Context, missing []string) string
	log     io.Writer
	// stall ends a wait that no node has made progress in for this long;
	// labelsChanged is when a node's state labels last changed.
	stall         time.Duration
	labelsChanged time.Time
	// upgrading counts the nodes in a driver upgrade.
	upgrading inFlight
	// now and poll are the clock and how often a wait looks; a test makes
	// them fast.
	now  func() time.Time
	poll time.Duration
}

// defaultStall is how long a phase may go without any node newly meeting its
// goal. Every phase moves node by node, several a minute even at 5000
// nodes; a rollout whose goal no node can meet stops at once.
const defaultStall = 5 * time.Minute

// stillWaiting is how often a long wait says which nodes it waits for.
const stillWaiting = 2 * time.Minute

func newTracker() *nodeTracker {
	return &nodeTracker{nodes: map[string]*corev1.Node{}, metSince: map[string]time.Time{}, goal: func(*corev1.Node) bool { return false },
		stall: defaultStall, now: time.Now, poll: 100 * time.Millisecond}
}

// trackNodes starts an informer on the cluster's GPU nodes; it stops with ctx.
func trackNodes(ctx context.Context, cs kubernetes.Interface) (*nodeTracker, error) {
	t := newTracker()
	t.explain = func(ctx context.Context, missing []string) string { return explainStuck(ctx, cs, missing) }
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj) },
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	// The handler's sync, not the informer's: the informer has synced once
	// its store holds every node, and the handler may not have seen them
	// yet. At 5000 nodes a run took its goal from the first 4257.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil, fmt.Errorf("node informer did not sync")
	}
	return t, nil
}

func (t *nodeTracker) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.Labels["feature.node.kubernetes.io/pci-10de.present"] != "true" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.update(n, t.now())
}

// update records a node as seen at now; the caller holds the lock. A
// change of any of its state labels is progress, even before the node
// meets the goal: at thousands of nodes the first one to has its whole
// chain up minutes into a rollout.
func (t *nodeTracker) update(n *corev1.Node, now time.Time) {
	old, ok := t.nodes[n.Name]
	if !ok || stateLabelsChanged(old, n) {
		t.labelsChanged = now
	}
	t.upgrading.see(old, n, now)
	t.nodes[n.Name] = n
	t.judge(n, now)
}

func stateLabelsChanged(old, n *corev1.Node) bool {
	for k, v := range n.Labels {
		if strings.HasPrefix(k, gpuv1.StateLabelPrefix) && old.Labels[k] != v {
			return true
		}
	}
	for k := range old.Labels {
		if _, ok := n.Labels[k]; strings.HasPrefix(k, gpuv1.StateLabelPrefix) && !ok {
			return true
		}
	}
	return false
}

func (t *nodeTracker) judge(n *corev1.Node, now time.Time) {
	if !t.goal(n) {
		delete(t.metSince, n.Name)
	} else if _, ok := t.metSince[n.Name]; !ok {
		t.metSince[n.Name] = now
	}
}

// setGoal starts a phase: from now on, nodes are judged by g.
func (t *nodeTracker) setGoal(g goal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.goal = g
	t.metSince = map[string]time.Time{}
	now := time.Now()
	for _, n := range t.nodes {
		t.judge(n, now)
	}
}

// upgradingFrom starts counting the upgrade's nodes at now.
func (t *nodeTracker) upgradingFrom(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.upgrading.restart(now)
}

// upgradingUntil returns the mean and the peak of the nodes in an upgrade
// at once, since upgradingFrom until now.
func (t *nodeTracker) upgradingUntil(now time.Time) (float64, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.upgrading.figures(now)
}

// names returns the GPU nodes seen so far.
func (t *nodeTracker) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.nodes))
	for name := range t.nodes {
		out = append(out, name)
	}
	return out
}

// wait blocks until every named node meets the goal, and returns when the
// last of them started to. It fails, naming the nodes left and why, once
// for t.stall no node has newly met the goal and no state label changed
// (the phase has stopped moving: waiting longer would only hide a
// defect), or after timeout.
func (t *nodeTracker) wait(ctx context.Context, names []string, timeout time.Duration) (time.Time, error) {
	start := t.now()
	deadline, nextReport := start.Add(timeout), start.Add(stillWaiting)
	moved := sinceMoved(start)
	for {
		t.mu.Lock()
		var last time.Time
		var missing []string
		for _, name := range names {
			since, ok := t.metSince[name]
			if !ok {
				missing = append(missing, name)
			} else if since.After(last) {
				last = since
			}
		}
		changed := t.labelsChanged
		t.mu.Unlock()
		if len(missing) == 0 {
			return last, nil
		}
		now := t.now()
		still := moved.see(len(names)-len(missing), now, changed)
		why := func() string {
			out := ": " + t.describeNotUp(missing)
			if t.explain != nil {
				out += "; " + t.explain(ctx, missing)
			}
			return out
		}
		switch {
		case still >= t.stall:
			return time.Time{}, fmt.Errorf("no node met the goal and no state changed for %s, %d of %d nodes never met it%s",
				t.stall, len(missing), len(names), why())
		case now.After(deadline):
			return time.Time{}, fmt.Errorf("%d of %d nodes still not there after %s%s", len(missing), len(names), timeout, why())
		case t.log != nil && now.After(nextReport):
			progress(t.log, "still waiting for %d of %d nodes%s", len(missing), len(names), why())
			nextReport = now.Add(stillWaiting)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(t.poll):
		}
	}
}

// movement is when a phase last moved: its count of things done grew, or
// something else changed that leads to more.
type movement struct {
	most  int
	moved time.Time
}

func sinceMoved(start time.Time) *movement { return &movement{most: -1, moved: start} }

// see records how many things are done at now, and when something else
// last changed; it returns how long the phase has not moved.
func (m *movement) see(done int, now, changed time.Time) time.Duration {
	if done > m.most {
		m.most, m.moved = done, now
	}
	if changed.After(m.moved) {
		m.moved = changed
	}
	return now.Sub(m.moved)
}

// stackUp is met by a node whose GPU stack is complete: every per-node
// state up (ready or disabled), judged as the operator judges it.
func stackUp(g *state.Graph) goal {
	return func(n *corev1.Node) bool { return g.AllUp(n.Labels) }
}

// upAfterReset is met by a node once it has been seen with its stack
// incomplete and then complete: a rebooted node whose chain re-formed.
func upAfterReset(g *state.Graph) goal {
	up := stackUp(g)
	reset := map[string]bool{}
	return func(n *corev1.Node) bool {
		if !up(n) {
			reset[n.Name] = true
			return false
		}
		return reset[n.Name]
	}
}

// upgraded is met by a node that runs the driver version, is done upgrading,
// is no longer cordoned and has its stack complete.
func upgraded(g *state.Graph, version string) goal {
	up := stackUp(g)
	return func(n *corev1.Node) bool {
		return n.Labels[gpuv1.LabelDriverVersion] == version &&
			n.Labels[gpuv1.LabelUpgradeState] == string(gpuv1.UpgradeDone) &&
			!n.Spec.Unschedulable && up(n)
	}
}
