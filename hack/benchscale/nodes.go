package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
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
}

// stillWaiting is how often a long wait says which nodes it waits for.
const stillWaiting = 2 * time.Minute

// trackNodes starts an informer on the cluster's GPU nodes; it stops with ctx.
func trackNodes(ctx context.Context, cs kubernetes.Interface) (*nodeTracker, error) {
	t := &nodeTracker{nodes: map[string]*corev1.Node{}, metSince: map[string]time.Time{}, goal: func(*corev1.Node) bool { return false },
		explain: func(ctx context.Context, missing []string) string { return explainStuck(ctx, cs, missing) }}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj) },
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
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
	t.nodes[n.Name] = n
	t.judge(n, time.Now())
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
// last of them started to; it fails after timeout, saying how many are left.
func (t *nodeTracker) wait(ctx context.Context, names []string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	nextReport := time.Now().Add(stillWaiting)
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
		t.mu.Unlock()
		if len(missing) == 0 {
			return last, nil
		}
		why := func() string {
			if t.explain == nil {
				return ""
			}
			return ": " + t.explain(ctx, missing)
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d nodes still not there after %s%s", len(missing), len(names), timeout, why())
		}
		if t.log != nil && time.Now().After(nextReport) {
			progress(t.log, "still waiting for %d of %d nodes%s", len(missing), len(names), why())
			nextReport = time.Now().Add(stillWaiting)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// allStatesReady is true when every per-node state is ready on the node.
func allStatesReady(states []string) goal {
	return func(n *corev1.Node) bool {
		for _, s := range states {
			if n.Labels[gpuv1.StateLabel(s)] != "ready" {
				return false
			}
		}
		return true
	}
}

// readyAfterReset is met by a node once it has been seen not ready on some
// state and then ready on all: a rebooted node whose chain re-formed.
func readyAfterReset(states []string) goal {
	ready := allStatesReady(states)
	reset := map[string]bool{}
	return func(n *corev1.Node) bool {
		if !ready(n) {
			reset[n.Name] = true
			return false
		}
		return reset[n.Name]
	}
}

// upgraded is met by a node that runs the driver version, is done upgrading,
// is no longer cordoned and is ready on every state.
func upgraded(states []string, version string) goal {
	ready := allStatesReady(states)
	return func(n *corev1.Node) bool {
		return n.Labels[gpuv1.LabelDriverVersion] == version &&
			n.Labels[gpuv1.LabelUpgradeState] == string(gpuv1.UpgradeDone) &&
			!n.Spec.Unschedulable && ready(n)
	}
}
