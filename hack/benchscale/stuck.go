package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// simulatorStuck reports whether an operand pod is held back by the
// simulator rather than the operator: its containers are ready but the pod
// is not, which is how the node lifecycle controller leaves a pod when its
// node's lease lapsed, and which only a kubelet (here, the pod-ready-again
// kwok stage) sets right.
func simulatorStuck(p *corev1.Pod) bool {
	var ready, containersReady bool
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			ready = c.Status == corev1.ConditionTrue
		case corev1.ContainersReady:
			containersReady = c.Status == corev1.ConditionTrue
		}
	}
	return containersReady && !ready
}

// explainStuck says, for nodes that have not met the goal, which the
// simulator holds (a pod left not ready with ready containers) and which
// wait for anything else (the operator's gates, pods still being scheduled
// or started), naming a few of each.
func explainStuck(ctx context.Context, cs kubernetes.Interface, missing []string) string {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "cannot tell why: " + err.Error()
	}
	waiting := make(map[string]bool, len(missing))
	for _, n := range missing {
		waiting[n] = true
	}
	bySim := map[string][]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if waiting[p.Spec.NodeName] && simulatorStuck(p) {
			bySim[p.Spec.NodeName] = append(bySim[p.Spec.NodeName], p.Name)
		}
	}
	var sim, op []string
	for _, n := range missing {
		if pods := bySim[n]; len(pods) > 0 {
			sim = append(sim, fmt.Sprintf("%s (%s)", n, strings.Join(pods, ", ")))
		} else {
			op = append(op, n)
		}
	}
	first := func(l []string) string {
		if len(l) > 5 {
			return strings.Join(l[:5], "; ") + fmt.Sprintf("; and %d more", len(l)-5)
		}
		return strings.Join(l, "; ")
	}
	parts := []string{fmt.Sprintf("%d held by the simulator", len(sim)), fmt.Sprintf("%d not there yet for other reasons", len(op))}
	if len(sim) > 0 {
		parts[0] += " (pods with ready containers left not ready: " + first(sim) + ")"
	}
	if len(op) > 0 {
		parts[1] += " (" + first(op) + ")"
	}
	return strings.Join(parts, "; ")
}

// countNotUp adds, for a node that has not met a goal, each per-node state
// that holds its chain back, as "state=value", to counts.
func countNotUp(counts map[string]int, n *corev1.Node) {
	if n == nil {
		counts["node not seen"]++
		return
	}
	for k, v := range n.Labels {
		if s, ok := strings.CutPrefix(k, gpuv1.StateLabelPrefix); ok && !gpuv1.StateValue(v).Up() {
			counts[s+"="+v]++
		}
	}
}

// describeNotUp says how many of the missing nodes each state value holds
// back, most first; counted only when said, not at every look.
func (t *nodeTracker) describeNotUp(missing []string) string {
	counts := map[string]int{}
	t.mu.Lock()
	for _, name := range missing {
		countNotUp(counts, t.nodes[name])
	}
	t.mu.Unlock()
	if len(counts) == 0 {
		return "no state label holds them back"
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s on %d", k, counts[k]))
	}
	return "states not up: " + strings.Join(parts, ", ")
}
