//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
)

// ReadinessTaintInput is the readiness taint's scenario.
type ReadinessTaintInput struct {
	// Reboot are ready nodes to reboot with GPU pods waiting for them.
	Reboot []string
	// Ready stay ready throughout; NeverReady never get ready.
	Ready, NeverReady []string
}

// ReadinessTaintSpec turns the readiness taint on: the nodes that never get
// ready carry it, the ready ones do not. It reboots nodes with GPU pods
// waiting for exactly those nodes, and checks on the API server's order of
// writes (resourceVersions, which etcd orders) that no pod was bound to a
// node while the node carried the taint, nor before every state was ready
// there. Turning it off removes every taint the operator set.
func ReadinessTaintSpec(ctx context.Context, in ReadinessTaintInput) {
	setReadinessTaint(ctx, true)
	Eventually(func(g Gomega) {
		for _, n := range in.NeverReady {
			g.Expect(tainted(g, ctx, n)).To(BeTrue(), "node %s never gets ready", n)
		}
		for _, n := range append(slices.Clone(in.Ready), in.Reboot...) {
			g.Expect(tainted(g, ctx, n)).To(BeFalse(), "node %s is ready", n)
		}
	}).WithTimeout(time.Minute).Should(Succeed())

	nodes := watchTaints(ctx)
	defer nodes.stop()
	binds := watchBinds(ctx, "readiness")
	defer binds.stop()
	for _, n := range in.Reboot {
		history.forget(n)
	}
	_, err := sh("hack/sim/reboot.sh", in.Reboot...)
	Expect(err).NotTo(HaveOccurred())
	pinnedGPUPods(ctx, "readiness", in.Reboot, int32(2*len(in.Reboot)))
	AllReadySpec(ctx, AllReadyInput{Nodes: in.Reboot})

	Eventually(binds.count).WithTimeout(2*time.Minute).Should(Equal(2*len(in.Reboot)), "every GPU pod bound")
	for pod, b := range binds.all() {
		at, ok := nodes.at(b.node, b.rv)
		Expect(ok).To(BeTrue(), "pod %s bound to %s, a node never seen", pod, b.node)
		Expect(at.tainted).To(BeFalse(), "pod %s bound to %s while it carried the readiness taint", pod, b.node)
		Expect(at.ready).To(BeTrue(), "pod %s bound to %s before every state was ready there", pod, b.node)
	}
	for _, n := range in.Reboot {
		Expect(nodes.everTainted(n)).To(BeTrue(), "the reboot of %s brought the taint back", n)
	}

	Expect(k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "readiness"}})).To(Succeed())
	setReadinessTaint(ctx, false)
	Eventually(func(g Gomega) {
		list := &corev1.NodeList{}
		g.Expect(k8s.List(ctx, list)).To(Succeed())
		for _, n := range list.Items {
			g.Expect(slices.ContainsFunc(n.Spec.Taints, gating.HasReadinessTaintKey)).To(BeFalse(), "node %s", n.Name)
		}
	}).WithTimeout(time.Minute).Should(Succeed())
}

func setReadinessTaint(ctx context.Context, on bool) {
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = on })
}

func tainted(g Gomega, ctx context.Context, node string) bool {
	n := &corev1.Node{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	return slices.ContainsFunc(n.Spec.Taints, gating.HasReadinessTaintKey)
}

// pinnedGPUPods runs a Deployment of GPU pods that may run only on nodes,
// and do not tolerate the readiness taint.
func pinnedGPUPods(ctx context.Context, namespace string, nodes []string, replicas int32) {
	createGPUDeployment(ctx, namespace, "pinned", replicas, &corev1.Affinity{NodeAffinity: onlyOn(nodes)})
}

// rv reads a resourceVersion as the number the simulated cluster's etcd
// makes it: opaque to clients in general, ordered here.
func rv(o metav1.Object) uint64 {
	v, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return v
}

// nodeState is a node as one write left it.
type nodeState struct {
	rv             uint64
	tainted, ready bool
}

// taintWatch records every version of every node.
type taintWatch struct {
	mu       sync.Mutex
	versions map[string][]nodeState
	stop     context.CancelFunc
}

func watchTaints(ctx context.Context) *taintWatch {
	ctx, cancel := context.WithCancel(ctx)
	t := &taintWatch{versions: map[string][]nodeState{}, stop: cancel}
	w, err := k8s.Watch(ctx, &corev1.NodeList{})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Error {
				continue
			}
			s := nodeState{rv: rv(n), tainted: slices.ContainsFunc(n.Spec.Taints, gating.HasReadinessTaintKey), ready: true}
			for _, st := range states {
				if v := n.Labels[gpuv1.StateLabel(st)]; v != string(gpuv1.StateReady) && v != string(gpuv1.StateDisabled) {
					s.ready = false
				}
			}
			t.mu.Lock()
			t.versions[n.Name] = append(t.versions[n.Name], s)
			t.mu.Unlock()
		}
	}()
	return t
}

// at returns the node as it was when the write at resourceVersion v
// happened: its last version before v.
func (t *taintWatch) at(node string, v uint64) (nodeState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out nodeState
	found := false
	for _, s := range t.versions[node] {
		if s.rv < v && (!found || s.rv > out.rv) {
			out, found = s, true
		}
	}
	return out, found
}

func (t *taintWatch) everTainted(node string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.versions[node], func(s nodeState) bool { return s.tainted })
}

// bind is when a pod was bound: the resourceVersion of the first version
// of it that names a node.
type bind struct {
	node string
	rv   uint64
}

type bindWatch struct {
	mu    sync.Mutex
	binds map[string]bind
	stop  context.CancelFunc
}

func watchBinds(ctx context.Context, namespace string) *bindWatch {
	ctx, cancel := context.WithCancel(ctx)
	b := &bindWatch{binds: map[string]bind{}, stop: cancel}
	w, err := k8s.Watch(ctx, &corev1.PodList{}, client.InNamespace(namespace))
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			b.mu.Lock()
			if _, seen := b.binds[p.Name]; !seen {
				b.binds[p.Name] = bind{node: p.Spec.NodeName, rv: rv(p)}
			}
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *bindWatch) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.binds)
}

func (b *bindWatch) all() map[string]bind {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]bind, len(b.binds))
	for k, v := range b.binds {
		out[k] = v
	}
	return out
}

// UnhealthyGPUsSpec makes the device plugin of node report GPUs unhealthy
// (the simulator takes them out of allocatable), checks that the operator
// records them on the node, says so in an event and in the ClusterPolicy's
// status, and that it all clears when they are healthy again.
func UnhealthyGPUsSpec(ctx context.Context, node string) {
	history.forgetValue(node, string(gpuv1.StatePending))
	setSimAnnotation(ctx, node, fakeUnhealthyGPUs, "2")
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(n.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationUnhealthyGPUs, "2"))
		g.Expect(nodeEventReasons(g, ctx, node)).To(ContainElement("GPUsUnhealthy"))
		g.Expect(activePolicy(g, ctx).Status.GPUHealth).To(Equal(&gpuv1.GPUHealthSummary{UnhealthyNodes: 1, UnhealthyGPUs: 2,
			Message: "unhealthy GPUs on " + node + " (2)"}))
	}).WithTimeout(time.Minute).Should(Succeed())
	// Unhealthy GPUs do not ungate the device plugin, nor anything after it.
	for _, st := range states {
		_, left := history.firstSeen(node, st, string(gpuv1.StatePending))
		Expect(left).To(BeFalse(), "%s left ready", st)
	}

	setSimAnnotation(ctx, node, fakeUnhealthyGPUs, "")
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(n.Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
		g.Expect(nodeEventReasons(g, ctx, node)).To(ContainElement("GPUsHealthy"))
		g.Expect(activePolicy(g, ctx).Status.GPUHealth).To(BeNil())
	}).WithTimeout(time.Minute).Should(Succeed())
}

// fakeUnhealthyGPUs is the simulator's annotation (internal/test/fakenode)
// for GPUs its device plugin reports unhealthy.
const fakeUnhealthyGPUs = "sim.gpu-operator.io/unhealthy-gpus"

// setSimAnnotation sets, or with "" removes, a simulator annotation.
func setSimAnnotation(ctx context.Context, node, key, value string) {
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if value == "" {
			delete(n.Annotations, key)
		} else {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[key] = value
		}
		g.Expect(k8s.Patch(ctx, n, patch)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func nodeEventReasons(g Gomega, ctx context.Context, node string) []string {
	list := &eventsv1.EventList{}
	g.Expect(k8s.List(ctx, list)).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func activePolicy(g Gomega, ctx context.Context) *gpuv1.ClusterPolicy {
	list := &gpuv1.ClusterPolicyList{}
	g.Expect(k8s.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	return &list.Items[0]
}

// setPolicy changes the active ClusterPolicy, retrying on conflicts.
func setPolicy(ctx context.Context, mutate func(*gpuv1.ClusterPolicy)) {
	Eventually(func(g Gomega) {
		cp := activePolicy(g, ctx)
		patch := client.MergeFrom(cp.DeepCopy())
		mutate(cp)
		g.Expect(k8s.Patch(ctx, cp, patch)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// onlyOn is a node affinity that allows the named nodes alone: one term
// per node, as a field selector term takes one name.
func onlyOn(nodes []string) *corev1.NodeAffinity {
	var terms []corev1.NodeSelectorTerm
	for _, n := range nodes {
		terms = append(terms, corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}},
		})
	}
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}
