package clusterpolicy

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// The status summarised from the shares kept between reconciles is the
// one summarised from every node afresh (issue 54, item 1), through random
// changes of the nodes' state labels, operations, waiting reasons,
// unhealthy GPUs, pools, NFD's label and the host's driver, nodes coming
// and going (one deleted and made again under its name), and the policy
// enabling and disabling states. A change bumps the node's
// resourceVersion, as the API server does; the run must have kept shares.
func TestKeptSharesSummariseAsFreshOnes(t *testing.T) {
	g := NewWithT(t)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	perNode := graph.PerNode()
	values := []gpuv1.StateValue{gpuv1.StateReady, gpuv1.StatePending, gpuv1.StateFailed, gpuv1.StateUpgrading, gpuv1.StateDisabled, ""}
	rnd := rand.New(rand.NewPCG(54, 3))
	pick := func(of ...string) string { return of[rnd.IntN(len(of))] }
	version := 0
	var uid int
	fresh := func(name string) corev1.Node {
		uid++
		n := ready(name)
		n.UID = types.UID(strconv.Itoa(uid))
		return n
	}
	nodes := make([]corev1.Node, 0, 40)
	for i := range 30 {
		nodes = append(nodes, fresh(fmt.Sprintf("n%02d", i)))
	}
	changes := []func(n *corev1.Node){
		func(n *corev1.Node) {
			n.Labels[gpuv1.StateLabel(string(perNode[rnd.IntN(len(perNode))]))] = string(values[rnd.IntN(len(values))])
		},
		func(n *corev1.Node) {
			n.Labels[gpuv1.LabelUpgradeState] = pick("", "upgrade-required", "upgrade-done", "upgrade-failed")
		},
		func(n *corev1.Node) {
			n.Labels[gpuv1.LabelRemediationState] = pick("", "remediation-required", "remediation-done")
		},
		func(n *corev1.Node) { n.Labels[gpuv1.LabelDriverPool] = pick("", "h100", "a100") },
		func(n *corev1.Node) { n.Labels[gpuv1.LabelDeployOperands] = pick("", "false", "true") },
		func(n *corev1.Node) { n.Labels[gpuv1.LabelGPUPresent] = pick("true", "") },
		func(n *corev1.Node) { n.Labels[gpuv1.DeployLabel(string(state.Driver))] = pick("false", "true") },
		func(n *corev1.Node) {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[gpuv1.AnnotationMaintenanceWaiting] = pick("", "the budget is full")
			n.Annotations[gpuv1.AnnotationHostDriver] = pick("", "nvidia-smi found on the host")
			n.Annotations[gpuv1.AnnotationUnhealthyGPUs] = pick("", "0", "2")
		},
	}
	enabled := map[state.Name]bool{}
	for _, s := range graph.States() {
		enabled[s.Name] = true
	}
	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 30, NumberReady: 29}}
	kept := &shares{}
	reused := 0
	for round := range 300 {
		for range rnd.IntN(4) {
			n := &nodes[rnd.IntN(len(nodes))]
			changes[rnd.IntN(len(changes))](n)
			version++
			n.ResourceVersion = strconv.Itoa(version)
		}
		switch rnd.IntN(20) {
		case 0:
			nodes = append(nodes, fresh(fmt.Sprintf("n%02d", len(nodes))))
		case 1:
			i := rnd.IntN(len(nodes))
			nodes = append(nodes[:i], nodes[i+1:]...)
		case 2:
			// Deleted and made again under its name, at a version the
			// old one had.
			i := rnd.IntN(len(nodes))
			version := nodes[i].ResourceVersion
			nodes[i] = fresh(nodes[i].Name)
			nodes[i].ResourceVersion = version
		case 3:
			name := perNode[rnd.IntN(len(perNode))]
			enabled[name] = !enabled[name]
		}
		before := map[string]*nodeShare{}
		for name, s := range kept.byNode {
			before[name] = s
		}
		l := listed(nodes)
		got := summarizeShares(graph, enabled, l, kept.of(graph, perNode, l), ds)
		want := summarize(graph, enabled, nodes, ds)
		g.Expect(got).To(Equal(want), "round %d", round)
		for name, s := range kept.byNode {
			if before[name] == s {
				reused++
			}
		}
	}
	g.Expect(reused).To(BeNumerically(">", 300*20), "shares were kept")
	t.Logf("%d shares kept over 300 summaries", reused)
}

// summarize is the summary of nodes with every share read afresh: what
// the status would say without the shares kept between reconciles.
func summarize(g *state.Graph, enabled map[state.Name]bool, nodes []corev1.Node, ds *appsv1.DaemonSet) summary {
	perNode := g.PerNode()
	shares := make([]*nodeShare, len(nodes))
	for i := range nodes {
		shares[i] = shareOf(g, perNode, &nodes[i])
	}
	return summarizeShares(g, enabled, listed(nodes), shares, ds)
}

// listed is nodes as a lister hands them out: pointers to the objects.
func listed(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	return out
}
