package main

import (
	"context"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// Waves says where the ordered rollout's time goes, one state on one node
// at a time: from the state's prerequisites ready on the node to the
// operator's next write of the node (its gate opens: the operator's
// decision), to the pod's creation (the DaemonSet controller), to its
// binding (the scheduler), to its readiness (kwok, standing in for the
// kubelet). A state without a node gate has no decision: its DaemonSet
// time runs from its prerequisites ready. Pod times have one-second
// resolution, so a single wave's split is rough; means over a fleet are
// not. A write of the node by the upgrade controller within a wave counts
// as the gate's, which shortens the decision and lengthens the DaemonSet
// controller's time.
type Waves struct {
	All    WaveStages            `json:"all"`
	States map[string]WaveStages `json:"states"`
}

// WaveStages are the four parts of a wave.
type WaveStages struct {
	Decision  Stat `json:"decision"`
	DaemonSet Stat `json:"daemonSet"`
	Scheduler Stat `json:"scheduler"`
	Kubelet   Stat `json:"kubelet"`
}

// Stat summarises durations in seconds.
type Stat struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P90  float64 `json:"p90"`
}

// podTimes is when a state's pod on a node was created, bound and ready.
type podTimes struct {
	node, state                 string
	created, scheduled, readyAt time.Time
}

// capturePodTimes lists the operand pods, once every node is ready.
func capturePodTimes(ctx context.Context, cs kubernetes.Interface) ([]podTimes, error) {
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: operandSelector})
	if err != nil {
		return nil, err
	}
	var out []podTimes
	for i := range list.Items {
		p := &list.Items[i]
		st := p.Labels[render.LabelState]
		if st == "" || p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		t := podTimes{node: p.Spec.NodeName, state: st, created: p.CreationTimestamp.Time}
		for _, c := range p.Status.Conditions {
			switch {
			case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue:
				t.scheduled = c.LastTransitionTime.Time
			case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
				t.readyAt = c.LastTransitionTime.Time
			}
		}
		if !t.scheduled.IsZero() && !t.readyAt.IsZero() {
			out = append(out, t)
		}
	}
	return out, nil
}

// nodeWrites returns the times of the operator's writes of each node.
func nodeWrites(reqs []simcluster.Request) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, r := range reqs {
		if r.Resource == "nodes" && r.Name != "" && r.Write() {
			out[r.Name] = append(out[r.Name], r.At)
		}
	}
	return out
}

// waves splits each wave of the rollout that started at start. gated
// says which states have a node gate; prerequisites lists each state's.
func waves(pods []podTimes, prerequisites map[string][]string, gated map[string]bool,
	writes map[string][]time.Time, start time.Time) Waves {
	type key struct{ node, state string }
	byKey := map[key]podTimes{}
	for _, p := range pods {
		byKey[key{p.node, p.state}] = p
	}
	type parts struct{ decision, daemonSet, scheduler, kubelet []float64 }
	all, perState := &parts{}, map[string]*parts{}
	for _, p := range pods {
		// Pod times are whole seconds: compare at that resolution.
		ready := start.Truncate(time.Second)
		for _, q := range prerequisites[p.state] {
			if prev, ok := byKey[key{p.node, q}]; ok && prev.readyAt.After(ready) {
				ready = prev.readyAt
			}
		}
		ps := perState[p.state]
		if ps == nil {
			ps = &parts{}
			perState[p.state] = ps
		}
		opened := ready
		if gated[p.state] {
			i := slices.IndexFunc(writes[p.node], func(t time.Time) bool { return !t.Before(ready) })
			if i < 0 || writes[p.node][i].After(p.created.Add(time.Second)) {
				continue // no write opened this gate: not a wave of this rollout
			}
			opened = writes[p.node][i]
			for _, s := range []*parts{all, ps} {
				s.decision = append(s.decision, opened.Sub(ready).Seconds())
			}
		}
		for _, s := range []*parts{all, ps} {
			s.daemonSet = append(s.daemonSet, p.created.Sub(opened).Seconds())
			s.scheduler = append(s.scheduler, p.scheduled.Sub(p.created).Seconds())
			s.kubelet = append(s.kubelet, p.readyAt.Sub(p.scheduled).Seconds())
		}
	}
	stages := func(p *parts) WaveStages {
		return WaveStages{Decision: stat(p.decision), DaemonSet: stat(p.daemonSet), Scheduler: stat(p.scheduler), Kubelet: stat(p.kubelet)}
	}
	out := Waves{All: stages(all), States: map[string]WaveStages{}}
	for name, p := range perState {
		out.States[name] = stages(p)
	}
	return out
}

func stat(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	sorted := slices.Sorted(slices.Values(v))
	p90 := sorted[int(math.Ceil(0.9*float64(len(sorted))))-1]
	return Stat{N: len(v), Mean: sum / float64(len(v)), P90: p90}
}

// stateGraph returns each per-node state's prerequisites of its first start, and whether a
// node gate opens it.
func stateGraph(g *state.Graph) (prerequisites map[string][]string, gated map[string]bool) {
	prerequisites, gated = map[string][]string{}, map[string]bool{}
	for _, s := range g.PerNode() {
		for _, q := range g.StartPrerequisites(s) {
			prerequisites[string(s)] = append(prerequisites[string(s)], string(q))
		}
		gated[string(s)] = len(g.Gate(s)) > 0
	}
	return prerequisites, gated
}
