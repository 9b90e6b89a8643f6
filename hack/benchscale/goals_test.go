package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// nodeWith is a node whose every per-node state of the registry's graph has
// the value all has, except those in set.
func nodeWith(t *testing.T, name string, all gpuv1.StateValue, set map[state.Name]gpuv1.StateValue) *corev1.Node {
	t.Helper()
	labels := map[string]string{}
	for _, s := range registryGraph(t).PerNode() {
		v, ok := set[s]
		if !ok {
			v = all
		}
		if v != "" {
			labels[gpuv1.StateLabel(string(s))] = string(v)
		}
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func registryGraph(t *testing.T) *state.Graph {
	t.Helper()
	g, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The goals judge every state the registry declares, a state added later
// included: disabled counts as done, as it does for the operator (mig-manager
// and the MPS control daemon are disabled on most nodes), and every value
// that holds the states after it back does not.
func TestGoalsJudgeEveryRegisteredState(t *testing.T) {
	g := registryGraph(t)
	up := stackUp(g)
	if !up(nodeWith(t, "n", gpuv1.StateReady, nil)) {
		t.Fatal("a node ready on every state has not met the rollout goal")
	}
	for _, s := range g.PerNode() {
		if !up(nodeWith(t, "n", gpuv1.StateReady, map[state.Name]gpuv1.StateValue{s: gpuv1.StateDisabled})) {
			t.Errorf("a node with %s disabled and every other state ready has not met the rollout goal", s)
		}
		for _, v := range []gpuv1.StateValue{gpuv1.StatePending, gpuv1.StateFailed, gpuv1.StateUpgrading} {
			if up(nodeWith(t, "n", gpuv1.StateReady, map[state.Name]gpuv1.StateValue{s: v})) {
				t.Errorf("a node with %s %s has met the rollout goal", s, v)
			}
		}
		st, _ := g.Get(s)
		if got := up(nodeWith(t, "n", gpuv1.StateReady, map[state.Name]gpuv1.StateValue{s: ""})); got != st.GatesOnlyWhenLabelled {
			t.Errorf("a node without the %s label met the rollout goal: %v, want %v (the state gates only once labelled: %v)",
				s, got, st.GatesOnlyWhenLabelled, st.GatesOnlyWhenLabelled)
		}
	}
}

func TestUpAfterResetNeedsAResetFirst(t *testing.T) {
	g := upAfterReset(registryGraph(t))
	if g(nodeWith(t, "n", gpuv1.StateReady, nil)) {
		t.Fatal("a node that was never seen reset counts as recovered")
	}
	if g(nodeWith(t, "n", gpuv1.StatePending, nil)) {
		t.Fatal("a reset node counts as recovered")
	}
	if g(nodeWith(t, "n", gpuv1.StateReady, map[state.Name]gpuv1.StateValue{state.DevicePlugin: gpuv1.StatePending})) {
		t.Fatal("a half re-formed chain counts as recovered")
	}
	if !g(nodeWith(t, "n", gpuv1.StateReady, map[state.Name]gpuv1.StateValue{state.MIGManager: gpuv1.StateDisabled})) {
		t.Fatal("a re-formed chain does not count as recovered")
	}
}

func TestTrackerTimesTheLastNodeToMeetTheGoal(t *testing.T) {
	tr := &nodeTracker{nodes: map[string]*corev1.Node{}, metSince: map[string]time.Time{}, goal: stackUp(registryGraph(t))}
	notYet := map[state.Name]gpuv1.StateValue{state.ContainerToolkit: gpuv1.StatePending}
	t0 := time.Now()
	tr.judge(nodeWith(t, "a", gpuv1.StateReady, nil), t0)
	tr.judge(nodeWith(t, "b", gpuv1.StateReady, notYet), t0)
	tr.judge(nodeWith(t, "b", gpuv1.StateReady, nil), t0.Add(time.Second))
	// A node that stays ready keeps its first time.
	tr.judge(nodeWith(t, "a", gpuv1.StateReady, nil), t0.Add(2*time.Second))
	if tr.metSince["a"] != t0 || tr.metSince["b"] != t0.Add(time.Second) {
		t.Errorf("metSince = %v", tr.metSince)
	}
	tr.judge(nodeWith(t, "n", gpuv1.StateFailed, nil), t0.Add(3*time.Second)) // node "n" never met it
	if _, ok := tr.metSince["n"]; ok {
		t.Error("a failed node met the goal")
	}
}

func TestUngateKeepsTheOSAndRequiresAGPU(t *testing.T) {
	spec := &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: gpuv1.LabelGPUPresent, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
				{Key: gpuv1.StateLabel("driver"), Operator: corev1.NodeSelectorOpIn, Values: []string{"ready", "disabled"}},
				{Key: "feature.node.kubernetes.io/system-os_release.ID", Operator: corev1.NodeSelectorOpIn, Values: []string{"rhel"}},
			},
		}}},
	}}}
	ungate(spec)
	got := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
	if len(got) != 2 || got[0].Key != "feature.node.kubernetes.io/system-os_release.ID" || got[1].Key != gpuNodeLabel {
		t.Errorf("ungated requirements = %+v, want the OS and the NFD GPU label", got)
	}
}

// A pod with ready containers that is not ready is the simulator's doing
// (the node lifecycle controller marked it after a lease lapsed); any other
// not-ready pod is not.
func TestSimulatorStuck(t *testing.T) {
	pod := func(ready, containers corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: containers}}}}
	}
	for _, tt := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod(corev1.ConditionFalse, corev1.ConditionTrue), true},
		{pod(corev1.ConditionFalse, corev1.ConditionFalse), false},
		{pod(corev1.ConditionTrue, corev1.ConditionTrue), false},
		{&corev1.Pod{}, false},
	} {
		if got := simulatorStuck(tt.pod); got != tt.want {
			t.Errorf("simulatorStuck(%v) = %v, want %v", tt.pod.Status.Conditions, got, tt.want)
		}
	}
}

// A phase left out reads "skipped" in the table, not a figure of 0.
func TestSkippedPhasesAreNotFigures(t *testing.T) {
	var b strings.Builder
	printTable(&b, []*Result{{Nodes: 5, Skipped: []string{"floor", "upgrade"}}})
	for _, line := range strings.Split(b.String(), "\n") {
		skipped := strings.Contains(line, "skipped")
		wantSkipped := strings.HasPrefix(line, "floor:") || strings.HasPrefix(line, "rollout / floor") || strings.HasPrefix(line, "upgrade:")
		if skipped != wantSkipped {
			t.Errorf("line %q: skipped=%v, want %v", line, skipped, wantSkipped)
		}
	}
}

// A phase no node moves in ends with an error that names the nodes left and
// the states that hold them back, instead of waiting for ever; the clock is
// the test's, a minute a look.
func TestWaitEndsAPhaseThatStopsMoving(t *testing.T) {
	tr := newTracker()
	tr.goal = stackUp(registryGraph(t))
	clock := time.Unix(0, 0)
	tr.now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	tr.poll = time.Millisecond
	held := map[state.Name]gpuv1.StateValue{state.DevicePlugin: gpuv1.StatePending}
	tr.update(nodeWith(t, "a", gpuv1.StateReady, nil), clock)
	tr.update(nodeWith(t, "b", gpuv1.StateReady, held), clock)
	_, err := tr.wait(context.Background(), []string{"a", "b"}, time.Hour)
	if err == nil {
		t.Fatal("a wait that no node moves in did not end")
	}
	for _, want := range []string{"no node met the goal and no state changed for 5m0s", "1 of 2 nodes", "device-plugin=pending on 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if clock.After(time.Unix(0, 0).Add(defaultStall + 2*time.Minute)) {
		t.Errorf("the wait went on until %s, past the stall of %s", clock.Sub(time.Unix(0, 0)), defaultStall)
	}
}

// A wait in which nodes keep arriving is not cut short by the stall.
func TestWaitLetsAMovingPhaseFinish(t *testing.T) {
	tr := newTracker()
	tr.goal = stackUp(registryGraph(t))
	clock := time.Unix(0, 0)
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	held := map[state.Name]gpuv1.StateValue{state.Driver: gpuv1.StatePending}
	for _, n := range names {
		tr.update(nodeWith(t, n, gpuv1.StateReady, held), clock)
	}
	// Each look is four minutes later, and one more node is up: slower
	// than the stall twice over in all, never between two nodes.
	next := 0
	tr.now = func() time.Time {
		clock = clock.Add(4 * time.Minute)
		if next < len(names) {
			tr.mu.Lock()
			tr.update(nodeWith(t, names[next], gpuv1.StateReady, nil), clock)
			tr.mu.Unlock()
			next++
		}
		return clock
	}
	tr.poll = time.Millisecond
	if _, err := tr.wait(context.Background(), names, time.Hour); err != nil {
		t.Fatalf("a phase that kept moving ended: %v", err)
	}
}

// A rollout whose nodes' chains move, all of them, state by state, is not
// cut short while no node has its whole chain up yet: at thousands of
// nodes the first one does minutes in.
func TestWaitLetsChainsThatMoveFinish(t *testing.T) {
	tr := newTracker()
	tr.goal = stackUp(registryGraph(t))
	clock := time.Unix(0, 0)
	names := []string{"a", "b"}
	chain := registryGraph(t).PerNode()
	held := func(upTo int) map[state.Name]gpuv1.StateValue {
		m := map[state.Name]gpuv1.StateValue{}
		for _, s := range chain[upTo:] {
			m[s] = gpuv1.StatePending
		}
		return m
	}
	for _, n := range names {
		tr.update(nodeWith(t, n, gpuv1.StateReady, held(0)), clock)
	}
	// Each look is four minutes later and one more state is up on every
	// node: no node meets the goal until the last look.
	up := 0
	tr.now = func() time.Time {
		clock = clock.Add(4 * time.Minute)
		if up < len(chain) {
			up++
			tr.mu.Lock()
			for _, n := range names {
				tr.update(nodeWith(t, n, gpuv1.StateReady, held(up)), clock)
			}
			tr.mu.Unlock()
		}
		return clock
	}
	tr.poll = time.Millisecond
	if _, err := tr.wait(context.Background(), names, 10*time.Hour); err != nil {
		t.Fatalf("a rollout whose chains kept moving ended: %v", err)
	}
}
