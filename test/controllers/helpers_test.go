package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

const (
	timeout  = 20 * time.Second
	interval = 100 * time.Millisecond
)

var states = []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"}

// fixture is one test's ClusterPolicy and GPU nodes.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	policy *gpuv1.ClusterPolicy
	nodes  []string
}

// setup creates a ClusterPolicy and n fake GPU nodes (as NFD would label
// them) and removes both when the test ends, waiting until the policy's
// cleanup finished so that the next test starts from a clean cluster.
func setup(t *testing.T, n int, mutate ...func(*gpuv1.ClusterPolicy)) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background()}
	prefix := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		f.createNode(name, nil)
		f.nodes = append(f.nodes, name)
	}
	f.policy = &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"}}
	for _, m := range mutate {
		m(f.policy)
	}
	NewWithT(t).Expect(k8sClient.Create(f.ctx, f.policy)).To(Succeed())
	t.Cleanup(f.teardown)
	return f
}

func (f *fixture) createNode(name string, labels map[string]string) {
	f.createNodeWith(name, labels, nil)
}

// createNodeWith creates a GPU node with labels and annotations, such as
// the simulator's sim.gpu-operator.io/ ones that say what the node is.
func (f *fixture) createNodeWith(name string, labels, annotations map[string]string) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{
		"feature.node.kubernetes.io/pci-10de.present":             "true",
		"feature.node.kubernetes.io/system-os_release.ID":         "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
	}}}
	for k, v := range labels {
		node.Labels[k] = v
	}
	g := NewWithT(f.t)
	g.Expect(k8sClient.Create(f.ctx, node)).To(Succeed())
	f.setBootID(name, "boot-1")
}

// setBootID sets a node's boot ID, as its kubelet does after a boot, and
// the rest of the status a kubelet reports: Ready, its runtime. The GPUs
// come once the device plugin runs there (the simulator's node agent).
func (f *fixture) setBootID(name, bootID string) {
	NewWithT(f.t).Eventually(func() error {
		node := f.node(name)
		node.Status.NodeInfo.BootID = bootID
		if node.Status.NodeInfo.ContainerRuntimeVersion == "" {
			node.Status.NodeInfo.ContainerRuntimeVersion = "containerd://2.1.4"
		}
		// The runtime's handlers come with the kubelet's first status,
		// as the simulator's node agent keeps them.
		fakenode.Apply(node, nil, nil)
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return k8sClient.Status().Update(f.ctx, node)
	}, timeout, interval).Should(Succeed())
}

func (f *fixture) teardown() {
	g := NewWithT(f.t)
	for _, cp := range f.policies() {
		g.Expect(client.IgnoreNotFound(k8sClient.Delete(f.ctx, &cp))).To(Succeed())
	}
	g.Eventually(f.policies, timeout, interval).Should(BeEmpty(), "ClusterPolicy cleanup did not finish")
	for _, n := range f.nodes {
		g.Expect(client.IgnoreNotFound(k8sClient.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))).To(Succeed())
		sim.set(n, "*", becomesReady)
	}
}

func (f *fixture) policies() []gpuv1.ClusterPolicy {
	list := &gpuv1.ClusterPolicyList{}
	NewWithT(f.t).Expect(k8sClient.List(f.ctx, list)).To(Succeed())
	return list.Items
}

func (f *fixture) node(name string) *corev1.Node {
	node := &corev1.Node{}
	if err := k8sClient.Get(f.ctx, client.ObjectKey{Name: name}, node); err != nil {
		f.t.Fatalf("getting node %s: %v", name, err)
	}
	return node
}

// stateOf returns a node's state label for state.
func (f *fixture) stateOf(node, state string) func() string {
	return func() string { return f.node(node).Labels[gpuv1.StateLabel(state)] }
}

// expectState waits until every given node has value for state.
func (f *fixture) expectState(value string, state string, nodes ...string) {
	f.t.Helper()
	f.expectStateMatching(Equal(value), state, nodes...)
}

// expectStateMatching waits until state's value on every given node
// matches.
func (f *fixture) expectStateMatching(m types.GomegaMatcher, state string, nodes ...string) {
	f.t.Helper()
	for _, n := range nodes {
		NewWithT(f.t).Eventually(f.stateOf(n, state), timeout, interval).Should(m, "node %s, state %s", n, state)
	}
}

// expectAllReady waits until every state is ready on every given node.
func (f *fixture) expectAllReady(nodes ...string) {
	f.t.Helper()
	for _, s := range states {
		f.expectState("ready", s, nodes...)
	}
}

// expectAllUp waits until every state is ready or disabled on every given
// node.
func (f *fixture) expectAllUp(nodes ...string) {
	f.t.Helper()
	for _, s := range states {
		f.expectStateMatching(BeElementOf("ready", "disabled"), s, nodes...)
	}
}

// podOn returns the live pod of a state on a node, or nil.
func (f *fixture) podOn(node, state string) *corev1.Pod {
	pods := &corev1.PodList{}
	NewWithT(f.t).Expect(k8sClient.List(f.ctx, pods, client.InNamespace(namespace),
		client.MatchingLabels{render.LabelState: state})).To(Succeed())
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			return p
		}
	}
	return nil
}

// daemonSets returns the DaemonSets of a state.
func (f *fixture) daemonSets(state string) []appsv1.DaemonSet {
	list := &appsv1.DaemonSetList{}
	NewWithT(f.t).Expect(k8sClient.List(f.ctx, list, client.InNamespace(namespace),
		client.MatchingLabels{render.LabelState: state})).To(Succeed())
	return list.Items
}

// daemonSetMatches reports whether a state's one DaemonSet selects the node.
func (f *fixture) daemonSetMatches(state, node string) bool {
	list := f.daemonSets(state)
	if len(list) != 1 {
		f.t.Fatalf("%d DaemonSets for state %s", len(list), state)
	}
	return f.selects(&list[0], node)
}

// selects reports whether a DaemonSet's node affinity takes a node.
func (f *fixture) selects(ds *appsv1.DaemonSet, node string) bool {
	ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec}).Match(f.node(node))
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

// setLabel sets (or with value "" removes) a label on a node, as a user
// would with kubectl label.
func (f *fixture) setLabel(node, key, value string) {
	g := NewWithT(f.t)
	g.Eventually(func() error {
		n := f.node(node)
		if value == "" {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
		return k8sClient.Update(f.ctx, n)
	}, timeout, interval).Should(Succeed())
}

// updatePolicy changes the active policy, retrying on conflicts.
func (f *fixture) updatePolicy(mutate func(*gpuv1.ClusterPolicy)) {
	g := NewWithT(f.t)
	g.Eventually(func() error {
		cp := &gpuv1.ClusterPolicy{}
		if err := k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp); err != nil {
			return err
		}
		mutate(cp)
		return k8sClient.Update(f.ctx, cp)
	}, timeout, interval).Should(Succeed())
}

// labelTable prints the nodes' state labels the way
// `kubectl get nodes -L nvidia.com/gpu.state.driver,...` shows them.
func (f *fixture) labelTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s", "NAME")
	for _, s := range states {
		fmt.Fprintf(&b, " %-24s", strings.ToUpper(s))
	}
	b.WriteString("\n")
	for _, n := range f.nodes {
		node := &corev1.Node{}
		if err := k8sClient.Get(f.ctx, client.ObjectKey{Name: n}, node); apierrors.IsNotFound(err) {
			continue
		}
		fmt.Fprintf(&b, "%-44s", n)
		for _, s := range states {
			fmt.Fprintf(&b, " %-24s", node.Labels[gpuv1.StateLabel(s)])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// daemonSetTable prints the operand DaemonSets the way
// `kubectl get ds -n gpu-operator -o wide` shows them. No DaemonSet
// controller runs here, so the pod counts come from the pods the simulator
// placed.
func (f *fixture) daemonSetTable() string {
	list := &appsv1.DaemonSetList{}
	NewWithT(f.t).Expect(k8sClient.List(f.ctx, list, client.InNamespace(namespace))).To(Succeed())
	pods := &corev1.PodList{}
	NewWithT(f.t).Expect(k8sClient.List(f.ctx, pods, client.InNamespace(namespace))).To(Succeed())
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %-7s %-5s %-13s %-28s %s\n", "NAME", "CURRENT", "READY", "STRATEGY", "CONTAINERS", "IMAGES")
	for _, ds := range list.Items {
		current, ready := 0, 0
		for i := range pods.Items {
			if p := &pods.Items[i]; metav1.IsControlledBy(p, &ds) {
				current++
				if c := readyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		var names, images []string
		for _, c := range ds.Spec.Template.Spec.Containers {
			names, images = append(names, c.Name), append(images, c.Image)
		}
		fmt.Fprintf(&b, "%-40s %-7d %-5d %-13s %-28s %s\n", ds.Name, current, ready, ds.Spec.UpdateStrategy.Type,
			strings.Join(names, ","), strings.Join(images, ","))
	}
	return b.String()
}

// envOf returns the value of a variable of a pod's main container.
func envOf(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// expectLabel waits until a node's label has value.
func (f *fixture) expectLabel(node, key, value string) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func() string { return f.node(node).Labels[key] }, 2*timeout, interval).Should(Equal(value), "node %s, label %s", node, key)
}

// eventsOf returns the notes of the events about a node.
func (f *fixture) eventsOf(node string) []string {
	list := &eventsv1.EventList{}
	NewWithT(f.t).Expect(k8sClient.List(f.ctx, list)).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node {
			notes = append(notes, e.Note)
		}
	}
	return notes
}
