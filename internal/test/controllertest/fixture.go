package controllertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/eventtrail"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// How long, and how often, a test waits for what a user would see.
const (
	Timeout  = 20 * time.Second
	Interval = 100 * time.Millisecond
)

// States are the states every GPU node runs by default, in order.
var States = []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery", "cuda-workload"}

// Fixture is one test's ClusterPolicy and GPU nodes.
type Fixture struct {
	T      *testing.T
	Ctx    context.Context
	Policy *gpuv1.ClusterPolicy
	Nodes  []string
	s      *Suite
}

// Setup creates a ClusterPolicy and n fake GPU nodes (as NFD would label
// them) and removes both when the test ends, waiting until the policy's
// cleanup finished so that the next test starts from a clean cluster.
func (s *Suite) Setup(t *testing.T, n int, mutate ...func(*gpuv1.ClusterPolicy)) *Fixture {
	t.Helper()
	f := &Fixture{T: t, Ctx: context.Background(), s: s}
	prefix := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		f.CreateNode(name, nil)
		f.Nodes = append(f.Nodes, name)
	}
	f.Policy = &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"}}
	for _, m := range mutate {
		m(f.Policy)
	}
	NewWithT(t).Expect(f.s.Client.Create(f.Ctx, f.Policy)).To(Succeed())
	t.Cleanup(f.Teardown)
	return f
}

func (f *Fixture) CreateNode(name string, labels map[string]string) {
	f.CreateNodeWith(name, labels, nil)
}

// CreateNodeWith creates a GPU node with labels and annotations, such as
// the simulator's sim.gpu-operator.io/ ones that say what the node is.
func (f *Fixture) CreateNodeWith(name string, labels, annotations map[string]string) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{
		"feature.node.kubernetes.io/pci-10de.present":             "true",
		"feature.node.kubernetes.io/system-os_release.ID":         "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
	}}}
	for k, v := range labels {
		node.Labels[k] = v
	}
	g := NewWithT(f.T)
	g.Expect(f.s.Client.Create(f.Ctx, node)).To(Succeed())
	f.SetBootID(name, "boot-1")
}

// SetBootID sets a node's boot ID, as its kubelet does after a boot, and
// the rest of the status a kubelet reports: Ready, its runtime. The GPUs
// come once the device plugin runs there (the simulator's node agent).
func (f *Fixture) SetBootID(name, bootID string) {
	NewWithT(f.T).Eventually(func() error {
		node := f.Node(name)
		node.Status.NodeInfo.BootID = bootID
		if node.Status.NodeInfo.ContainerRuntimeVersion == "" {
			node.Status.NodeInfo.ContainerRuntimeVersion = "containerd://2.1.4"
		}
		// The runtime's handlers come with the kubelet's first status,
		// as the simulator's node agent keeps them.
		fakenode.Apply(node, nil, nil)
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return f.s.Client.Status().Update(f.Ctx, node)
	}, Timeout, Interval).Should(Succeed())
}

func (f *Fixture) Teardown() {
	g := NewWithT(f.T)
	for _, cp := range f.Policies() {
		g.Expect(client.IgnoreNotFound(f.s.Client.Delete(f.Ctx, &cp))).To(Succeed())
	}
	// The cleanup may wait out GFD's labels on a node whose NFD is gone.
	g.Eventually(f.Policies, Timeout+f.s.Timers.GFDLabelsWait, Interval).Should(BeEmpty(), "ClusterPolicy cleanup did not finish")
	for _, n := range f.Nodes {
		g.Expect(client.IgnoreNotFound(f.s.Client.Delete(f.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))).To(Succeed())
		f.s.Sim.Set(n, "*", BecomesReady)
	}
}

func (f *Fixture) Policies() []gpuv1.ClusterPolicy {
	list := &gpuv1.ClusterPolicyList{}
	NewWithT(f.T).Expect(f.s.Client.List(f.Ctx, list)).To(Succeed())
	return list.Items
}

func (f *Fixture) Node(name string) *corev1.Node {
	node := &corev1.Node{}
	if err := f.s.Client.Get(f.Ctx, client.ObjectKey{Name: name}, node); err != nil {
		f.T.Fatalf("getting node %s: %v", name, err)
	}
	return node
}

// StateOf returns a node's state label for state.
func (f *Fixture) StateOf(node, state string) func() string {
	return func() string { return f.Node(node).Labels[gpuv1.StateLabel(state)] }
}

// ExpectState waits until every given node has value for state.
func (f *Fixture) ExpectState(value string, state string, nodes ...string) {
	f.T.Helper()
	f.ExpectStateMatching(Equal(value), state, nodes...)
}

// ExpectStateMatching waits until state's value on every given node
// matches.
func (f *Fixture) ExpectStateMatching(m types.GomegaMatcher, state string, nodes ...string) {
	f.T.Helper()
	for _, n := range nodes {
		NewWithT(f.T).Eventually(f.StateOf(n, state), Timeout, Interval).Should(m, "node %s, state %s", n, state)
	}
}

// ExpectAllReady waits until every state is ready on every given node.
func (f *Fixture) ExpectAllReady(nodes ...string) {
	f.T.Helper()
	for _, s := range States {
		f.ExpectState("ready", s, nodes...)
	}
}

// ExpectAllUp waits until every state is ready or disabled on every given
// Node.
func (f *Fixture) ExpectAllUp(nodes ...string) {
	f.T.Helper()
	for _, s := range States {
		f.ExpectStateMatching(BeElementOf("ready", "disabled"), s, nodes...)
	}
}

// PodOn returns the live pod of a state on a node, or nil.
func (f *Fixture) PodOn(node, state string) *corev1.Pod {
	pods := &corev1.PodList{}
	NewWithT(f.T).Expect(f.s.Client.List(f.Ctx, pods, client.InNamespace(Namespace),
		client.MatchingLabels{render.LabelState: state})).To(Succeed())
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			return p
		}
	}
	return nil
}

// DaemonSets returns the DaemonSets of a state.
func (f *Fixture) DaemonSets(state string) []appsv1.DaemonSet {
	list := &appsv1.DaemonSetList{}
	NewWithT(f.T).Expect(f.s.Client.List(f.Ctx, list, client.InNamespace(Namespace),
		client.MatchingLabels{render.LabelState: state})).To(Succeed())
	return list.Items
}

// DaemonSetMatches reports whether a state's one DaemonSet selects the node.
func (f *Fixture) DaemonSetMatches(state, node string) bool {
	list := f.DaemonSets(state)
	if len(list) != 1 {
		f.T.Fatalf("%d DaemonSets for state %s", len(list), state)
	}
	return f.Selects(&list[0], node)
}

// Selects reports whether a DaemonSet's node affinity takes a node.
func (f *Fixture) Selects(ds *appsv1.DaemonSet, node string) bool {
	ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec}).Match(f.Node(node))
	if err != nil {
		f.T.Fatal(err)
	}
	return ok
}

// SetLabel sets (or with value "" removes) a label on a node, as a user
// would with kubectl label.
func (f *Fixture) SetLabel(node, key, value string) { f.SetLabels(node, map[string]string{key: value}) }

// SetLabels sets (or with value "" removes) labels on a node in one write,
// as kubectl label with several does.
func (f *Fixture) SetLabels(node string, labels map[string]string) {
	g := NewWithT(f.T)
	g.Eventually(func() error {
		n := f.Node(node)
		for key, value := range labels {
			if value == "" {
				delete(n.Labels, key)
			} else {
				n.Labels[key] = value
			}
		}
		return f.s.Client.Update(f.Ctx, n)
	}, Timeout, Interval).Should(Succeed())
}

// UpdatePolicy changes the active policy, retrying on conflicts.
func (f *Fixture) UpdatePolicy(mutate func(*gpuv1.ClusterPolicy)) {
	g := NewWithT(f.T)
	g.Eventually(func() error {
		cp := &gpuv1.ClusterPolicy{}
		if err := f.s.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp); err != nil {
			return err
		}
		mutate(cp)
		return f.s.Client.Update(f.Ctx, cp)
	}, Timeout, Interval).Should(Succeed())
}

// LabelTable prints the nodes' state labels the way
// `kubectl get nodes -L nvidia.com/gpu.state.driver,...` shows them.
func (f *Fixture) LabelTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s", "NAME")
	for _, s := range States {
		fmt.Fprintf(&b, " %-24s", strings.ToUpper(s))
	}
	b.WriteString("\n")
	for _, n := range f.Nodes {
		node := &corev1.Node{}
		if err := f.s.Client.Get(f.Ctx, client.ObjectKey{Name: n}, node); apierrors.IsNotFound(err) {
			continue
		}
		fmt.Fprintf(&b, "%-44s", n)
		for _, s := range States {
			fmt.Fprintf(&b, " %-24s", node.Labels[gpuv1.StateLabel(s)])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// DaemonSetTable prints the operand DaemonSets the way
// `kubectl get ds -n gpu-operator -o wide` shows them. No DaemonSet
// controller runs here, so the pod counts come from the pods the simulator
// placed.
func (f *Fixture) DaemonSetTable() string {
	list := &appsv1.DaemonSetList{}
	NewWithT(f.T).Expect(f.s.Client.List(f.Ctx, list, client.InNamespace(Namespace))).To(Succeed())
	pods := &corev1.PodList{}
	NewWithT(f.T).Expect(f.s.Client.List(f.Ctx, pods, client.InNamespace(Namespace))).To(Succeed())
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %-7s %-5s %-13s %-28s %s\n", "NAME", "CURRENT", "READY", "STRATEGY", "CONTAINERS", "IMAGES")
	for _, ds := range list.Items {
		current, ready := 0, 0
		for i := range pods.Items {
			if p := &pods.Items[i]; metav1.IsControlledBy(p, &ds) {
				current++
				if c := ReadyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
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

// EnvOf returns the value of a variable of a pod's main container.
func EnvOf(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// ExpectLabel waits until a node's label has value.
func (f *Fixture) ExpectLabel(node, key, value string) {
	f.T.Helper()
	NewWithT(f.T).Eventually(func() string { return f.Node(node).Labels[key] }, 2*Timeout, Interval).Should(Equal(value), "node %s, label %s", node, key)
}

// EventsOf returns the steps of the events about a node: each Event's
// trail (internal/eventtrail), newest first.
func (f *Fixture) EventsOf(node string) []string {
	list := &eventsv1.EventList{}
	NewWithT(f.T).Expect(f.s.Client.List(f.Ctx, list)).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node {
			notes = append(notes, eventtrail.Steps(e.Note)...)
		}
	}
	return notes
}

// Annotate sets or, with "", removes a node's annotation, as a person (or
// the simulator's fault injection) would.
func (f *Fixture) Annotate(node, key, value string) {
	NewWithT(f.T).Eventually(func() error {
		n := f.Node(node)
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		if value == "" {
			delete(n.Annotations, key)
		} else {
			n.Annotations[key] = value
		}
		return f.s.Client.Update(f.Ctx, n)
	}, Timeout, Interval).Should(Succeed())
}

// AfterPasses returns once each named controller (maintenance,
// clusterpolicy) has reconciled successfully at least once since the
// call, in a pass that started after it: what a node is in then (held, not upgrading), or
// what was rendered, stands on the facts as they were at the call. A test
// holds on that, not on waiting a while. Each pass is woken by a label of
// no meaning on a node (the cache trims other controllers' annotations),
// which both controllers watch.
func (f *Fixture) AfterPasses(controllers ...string) {
	f.T.Helper()
	for i := range 2 {
		// The first may end a pass started before the call.
		before := f.passes(controllers)
		f.SetLabel(f.Nodes[0], "example.com/wake", fmt.Sprintf("%d-%d", time.Now().UnixNano(), i))
		NewWithT(f.T).Eventually(func() bool {
			now := f.passes(controllers)
			for j := range now {
				if now[j] <= before[j] {
					return false
				}
			}
			return true
		}, Timeout, Interval).Should(BeTrue(), "no pass of %v", controllers)
	}
}

// AfterMaintenancePasses is AfterPasses of the maintenance controller.
func (f *Fixture) AfterMaintenancePasses() { f.AfterPasses("maintenance") }

func (f *Fixture) passes(controllers []string) []float64 {
	out := make([]float64, len(controllers))
	for i, c := range controllers {
		// Successful passes only: one that failed may have stopped
		// before what the test holds on.
		out[i] = testutil.ToFloat64(f.s.metrics.Reconciles.WithLabelValues(c, "success"))
	}
	return out
}

// ExpectLabelWithin waits up to within until a node's label has value.
func (f *Fixture) ExpectLabelWithin(node, key, value string, within time.Duration) {
	f.T.Helper()
	NewWithT(f.T).Eventually(func() string { return f.Node(node).Labels[key] }, within, Interval).Should(Equal(value), "node %s, label %s", node, key)
}
