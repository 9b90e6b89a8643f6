package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

var testStates = []string{"driver", "container-toolkit"}

func nodeWith(driver, toolkit string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		gpuv1.StateLabel("driver"): driver, gpuv1.StateLabel("container-toolkit"): toolkit,
	}}}
}

func TestReadyAfterResetNeedsAResetFirst(t *testing.T) {
	g := readyAfterReset(testStates)
	if g(nodeWith("ready", "ready")) {
		t.Fatal("a node that was never seen reset counts as recovered")
	}
	if g(nodeWith("pending", "pending")) {
		t.Fatal("a reset node counts as recovered")
	}
	if g(nodeWith("ready", "pending")) {
		t.Fatal("a half re-formed chain counts as recovered")
	}
	if !g(nodeWith("ready", "ready")) {
		t.Fatal("a re-formed chain does not count as recovered")
	}
}

func TestTrackerTimesTheLastNodeToMeetTheGoal(t *testing.T) {
	tr := &nodeTracker{nodes: map[string]*corev1.Node{}, metSince: map[string]time.Time{}, goal: allStatesReady(testStates)}
	a, b := nodeWith("ready", "ready"), nodeWith("ready", "pending")
	a.Name, b.Name = "a", "b"
	t0 := time.Now()
	tr.judge(a, t0)
	tr.judge(b, t0)
	b = nodeWith("ready", "ready")
	b.Name = "b"
	tr.judge(b, t0.Add(time.Second))
	// A node that stays ready keeps its first time.
	tr.judge(a, t0.Add(2*time.Second))
	if tr.metSince["a"] != t0 || tr.metSince["b"] != t0.Add(time.Second) {
		t.Errorf("metSince = %v", tr.metSince)
	}
	tr.judge(nodeWith("failed", "pending"), t0.Add(3*time.Second)) // node "n" never met it
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
