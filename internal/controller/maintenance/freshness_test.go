package maintenance

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// staleNodes serves node lists from a snapshot while one is set: an
// informer cache that has not yet delivered the last writes.
type staleNodes struct {
	client.Client
	nodes *corev1.NodeList
}

func (s *staleNodes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*corev1.NodeList); ok && s.nodes != nil {
		s.nodes.DeepCopyInto(l)
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// gpuNode is a GPU node whose stack is ready, on the container driver.
func gpuNode(name string, labels, annotations map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{
		"feature.node.kubernetes.io/pci-10de.present": "true",
		gpuv1.DeployLabel(string(state.Driver)):       gpuv1.LabelTrue,
		gpuv1.LabelDriverRoot:                         string(gpuv1.DriverRootContainer),
	}}}
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Status.NodeInfo.BootID = "boot-1"
	return n
}

// outdatedDriver is a driver pod on node of a DaemonSet whose template is
// newer.
func outdatedDriver(node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "driver-" + node, Namespace: fixture.Namespace, UID: types.UID("uid-driver-" + node),
		Labels:          map[string]string{render.LabelState: string(state.Driver), render.LabelManagedBy: render.ManagedBy},
		Annotations:     map[string]string{render.AnnotationTemplateHash: "old"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-driver-daemonset", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// repairHoldsThePlace is the cluster of the tests where the repair of a
// takes the one place of availability (maxUnavailable 1, which counts
// every hold; the repair takes no upgrade place) while b, its upgrade
// held by a person's skip label, has waited the longest: a fake API server (with
// funcs intercepting its calls, when given) in which a's GPUs are
// unhealthy as its device plugin says.
type repairHoldsThePlace struct {
	ctx   context.Context
	c     client.WithWatch
	graph *state.Graph
}

func newRepairHoldsThePlace(g Gomega, funcs *interceptor.Funcs) *repairHoldsThePlace {
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp := driverPolicy(g)
	cp.Spec.Operator.Remediation.Enabled = true
	cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	stamp := func(d time.Duration) string { return time.Now().Add(-d).UTC().Format(time.RFC3339) }
	a := gpuNode("a", map[string]string{gpuv1.LabelRemediationState: string(gpuv1.RemediationRequired)},
		map[string]string{AnnotationRemediationSince: stamp(time.Hour), gpuv1.AnnotationUnhealthyGPUs: "1"})
	b := gpuNode("b", map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeRequired), gpuv1.LabelUpgradeSkip: gpuv1.LabelTrue},
		map[string]string{AnnotationSince: stamp(2 * time.Hour)})
	builder := fakeAPI(cp, a, b, newDriverDaemonSet())
	if funcs != nil {
		builder = builder.WithInterceptorFuncs(*funcs)
	}
	c := builder.Build()
	a.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	a.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")}
	g.Expect(c.Status().Update(ctx, a)).To(Succeed())
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	return &repairHoldsThePlace{ctx: ctx, c: c, graph: graph}
}

// newDriverDaemonSet is the driver DaemonSet, its template newer than the
// driver pods of outdatedDriver.
func newDriverDaemonSet() *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-driver-daemonset", Namespace: fixture.Namespace,
		Labels: map[string]string{render.LabelState: string(state.Driver)}}}
	ds.Spec.Template.Annotations = map[string]string{render.AnnotationTemplateHash: "new"}
	return ds
}

// reconciler is a maintenance controller of its own (a process, a
// leader) that reads nodes through reads.
func (f *repairHoldsThePlace) reconciler(t *testing.T, g Gomega, reads client.Client) *Reconciler {
	m, err := metrics.New(prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	return &Reconciler{Client: reads, APIReader: f.c, Pods: podindex.Fixed(t, *outdatedDriver("b")), Graph: f.graph, Namespace: fixture.Namespace,
		Recorder: events.NewFakeRecorder(100), Metrics: m, Timers: fixture.Timers(), TrimNode: cacheconfig.NewNodeTrimmer().Node}
}

// look takes one look at the fleet.
func (f *repairHoldsThePlace) look(g Gomega, r *Reconciler) {
	_, err := r.Reconcile(f.ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
}

// letBGo is a person removing b's skip label; it returns b as it is then.
func (f *repairHoldsThePlace) letBGo(g Gomega) *corev1.Node {
	b := &corev1.Node{}
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: "b"}, b)).To(Succeed())
	delete(b.Labels, gpuv1.LabelUpgradeSkip)
	g.Expect(f.c.Update(f.ctx, b)).To(Succeed())
	return b
}

// nodes lists the nodes as they are now.
func (f *repairHoldsThePlace) nodes(g Gomega) *corev1.NodeList {
	list := &corev1.NodeList{}
	g.Expect(f.c.List(f.ctx, list)).To(Succeed())
	return list
}

// replacing returns the list with the nodes of the given names replaced.
func replacing(list *corev1.NodeList, nodes ...*corev1.Node) *corev1.NodeList {
	out := list.DeepCopy()
	for _, n := range nodes {
		for i := range out.Items {
			if out.Items[i].Name == n.Name {
				out.Items[i] = *n.DeepCopy()
			}
		}
	}
	return out
}

// Finding 5 of issue 25: a look decided on a cache that has not seen the
// last look's writes must not count a place as free that those writes
// took. Here the last look started the repair of a; the cache still shows
// a waiting, and b let go since. Admitting from the cache as it is would
// start b as well; the look reads a as it was written, and b waits.
func TestNoStartOnACacheBehindTheWrites(t *testing.T) {
	g := NewWithT(t)
	f := newRepairHoldsThePlace(g, nil)
	reads := &staleNodes{Client: f.c}
	r := f.reconciler(t, g, reads)
	before := f.nodes(g)
	f.look(g, r)
	g.Expect(labelOf(f.ctx, g, f.c, "a", gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationEviction)), "the repair of a started")

	reads.nodes = replacing(before, f.letBGo(g))
	f.look(g, r)
	g.Expect(labelOf(f.ctx, g, f.c, "b", gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)),
		"no upgrade starts on b while a's repair, which the cache has not seen, takes the place")
	waiting := &corev1.Node{}
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: "b"}, waiting)).To(Succeed())
	g.Expect(waiting.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMaintenanceWaiting, ContainSubstring("maxUnavailable")),
		"b is told it waits for the place a's repair took")

	// Once the cache caught up, the place is still taken, and b still waits.
	reads.nodes = nil
	f.look(g, r)
	g.Expect(labelOf(f.ctx, g, f.c, "b", gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)))
}

// The nodes a look wrote are kept until the cache has them, trimmed as
// the cache keeps nodes: the first look of an upgrade writes the whole
// fleet, and kept whole (other controllers' annotations, images, managed
// fields) they were the largest part of the operator's memory at its peak.
func TestWrittenNodesAreKeptAsTheCacheKeepsThem(t *testing.T) {
	g := NewWithT(t)
	f := newRepairHoldsThePlace(g, nil)
	a := &corev1.Node{}
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: "a"}, a)).To(Succeed())
	a.Annotations["example.com/someone-elses"] = "x"
	g.Expect(f.c.Update(f.ctx, a)).To(Succeed())
	a.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example.com/large:1"}, SizeBytes: 1 << 30}}
	g.Expect(f.c.Status().Update(f.ctx, a)).To(Succeed())
	r := f.reconciler(t, g, &staleNodes{Client: f.c})
	f.look(g, r)

	kept := r.written.last["a"]
	g.Expect(kept).NotTo(BeNil(), "the repair's start wrote a")
	g.Expect(kept.node.Labels).To(HaveKeyWithValue(gpuv1.LabelRemediationState, string(gpuv1.RemediationEviction)), "as written")
	g.Expect(kept.node.Spec.Taints).NotTo(BeEmpty(), "the repair's taint, which the cache keeps")
	g.Expect(kept.node.Annotations).NotTo(HaveKey("example.com/someone-elses"))
	g.Expect(kept.node.Status.Images).To(BeEmpty())
	g.Expect(kept.node.ManagedFields).To(BeEmpty())
}

// A repair's start writes twice: its taint, then its label. A cache that
// has the first write and not the second shows a node tainted and still
// waiting; read as it is, the place the repair took would look free. The
// version between the two writes is one this process wrote on, so the
// look reads the node as the second write left it, and b waits.
func TestAStartIsCountedOnTheVersionBetweenItsWrites(t *testing.T) {
	g := NewWithT(t)
	// between is a as the repair's first write left it.
	var between *corev1.Node
	f := newRepairHoldsThePlace(g, &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
		if err := c.Patch(ctx, o, p, opts...); err != nil {
			return err
		}
		if n, ok := o.(*corev1.Node); ok && n.Name == "a" && between == nil && p.Type() == types.MergePatchType {
			between = n.DeepCopy()
		}
		return nil
	}})
	reads := &staleNodes{Client: f.c}
	r := f.reconciler(t, g, reads)
	before := f.nodes(g)
	f.look(g, r)
	g.Expect(between).NotTo(BeNil(), "the repair's start patched its taint first")
	g.Expect(between.Labels[gpuv1.LabelRemediationState]).To(Equal(string(gpuv1.RemediationRequired)),
		"between the writes, a is tainted and still waiting")
	g.Expect(labelOf(f.ctx, g, f.c, "a", gpuv1.LabelRemediationState)).NotTo(Equal(string(gpuv1.RemediationRequired)), "the repair of a started")

	reads.nodes = replacing(before, between, f.letBGo(g))
	f.look(g, r)
	g.Expect(labelOf(f.ctx, g, f.c, "b", gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)),
		"no upgrade starts on b while a's repair, half seen by the cache, takes the place")
}

// A standby that takes over has a cache that has run for a while, and may
// not have the last writes of the leader before it. Here the old leader
// started the repair of a; the new leader's cache still shows a waiting,
// and b let go since. Its first look reads a live, and b waits.
func TestAStandbyTakingOverReadsTheLastLeadersWrites(t *testing.T) {
	g := NewWithT(t)
	f := newRepairHoldsThePlace(g, nil)
	before := f.nodes(g)
	f.look(g, f.reconciler(t, g, f.c))
	g.Expect(labelOf(f.ctx, g, f.c, "a", gpuv1.LabelRemediationState)).NotTo(Equal(string(gpuv1.RemediationRequired)),
		"the old leader started the repair of a")

	f.look(g, f.reconciler(t, g, &staleNodes{Client: f.c, nodes: replacing(before, f.letBGo(g))}))
	g.Expect(labelOf(f.ctx, g, f.c, "b", gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)),
		"the new leader's first look counts the place the old leader's repair took")
}

// A cache behind this controller's writes holds nothing back: at 1000
// nodes, with a hundred upgrading, some write of the last look is nearly
// always on its way, and a look that admitted no start then, or stepped
// nodes on versions its own writes had replaced, left most of the budget
// idle, and wrote again and again (issue 31: at 300 nodes, 69.8 node
// writes per node in the upgrade, 28.7 once a look read its own writes
// back). Here the cache still
// shows a as it was before the last look started its upgrade; the next
// look admits b, the older of the two nodes a person let go since, to the
// budget's second place, leaves c waiting, and takes a's next step on the
// node as written, without a conflict.
func TestAStaleCacheHoldsNoStartBack(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp := driverPolicy(g)
	cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To(int32(2))
	cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	stamp := func(d time.Duration) string { return time.Now().Add(-d).UTC().Format(time.RFC3339) }
	skipped := map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeRequired), gpuv1.LabelUpgradeSkip: gpuv1.LabelTrue}
	a := gpuNode("a", map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeRequired)},
		map[string]string{AnnotationSince: stamp(3 * time.Hour)})
	b := gpuNode("b", skipped, map[string]string{AnnotationSince: stamp(2 * time.Hour)})
	cNode := gpuNode("c", skipped, map[string]string{AnnotationSince: stamp(time.Hour)})
	c := fakeAPI(cp, a, b, cNode, newDriverDaemonSet()).Build()
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	m, err := metrics.New(prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	reads := &staleNodes{Client: c}
	r := &Reconciler{Client: reads, APIReader: c, Pods: podindex.Fixed(t, *outdatedDriver("a"), *outdatedDriver("b"), *outdatedDriver("c")),
		Graph: graph, Namespace: fixture.Namespace, Recorder: events.NewFakeRecorder(100), Metrics: m, Timers: fixture.Timers()}

	// The first look starts a; b and c are skipped: one place is left.
	before := &corev1.NodeList{}
	g.Expect(c.List(ctx, before)).To(Succeed())
	_, err = r.Reconcile(ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	first := labelOf(ctx, g, c, "a", gpuv1.LabelUpgradeState)
	g.Expect(first).NotTo(Equal(string(gpuv1.UpgradeRequired)), "a's upgrade started")

	// A person lets b and c go; the cache has that, and a as it was.
	for _, name := range []string{"b", "c"} {
		fresh := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, fresh)).To(Succeed())
		delete(fresh.Labels, gpuv1.LabelUpgradeSkip)
		g.Expect(c.Update(ctx, fresh)).To(Succeed())
		for i := range before.Items {
			if before.Items[i].Name == name {
				before.Items[i] = *fresh
			}
		}
	}
	reads.nodes = before
	_, err = r.Reconcile(ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(labelOf(ctx, g, c, "b", gpuv1.LabelUpgradeState)).NotTo(Equal(string(gpuv1.UpgradeRequired)),
		"b takes the second place on a cache that has not seen a's start")
	g.Expect(labelOf(ctx, g, c, "c", gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)),
		"c waits: a's start, which the cache has not seen, holds the first place")
	g.Expect(labelOf(ctx, g, c, "a", gpuv1.LabelUpgradeState)).NotTo(Equal(first),
		"a takes its next step on the node as written, not on the cache's older version")
}

func labelOf(ctx context.Context, g Gomega, c client.Client, node, key string) string {
	n := &corev1.Node{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	return n.Labels[key]
}

// pagedNodes serves a live node list page by page, as the API server does
// (the fake client ignores Limit and Continue), and decodes each page into
// the list it is given as a JSON decoder does: a field the response omits
// (the last page's continue token) keeps the value it had.
type pagedNodes struct {
	nodes []corev1.Node
	pages int
}

func (p *pagedNodes) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("not served")
}

func (p *pagedNodes) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	start := 0
	if o.Continue != "" {
		var err error
		if start, err = strconv.Atoi(o.Continue); err != nil {
			return err
		}
	}
	if p.pages > len(p.nodes) {
		return fmt.Errorf("listed %d pages of %d nodes: the pages never end", p.pages, len(p.nodes))
	}
	end := min(len(p.nodes), start+int(o.Limit))
	l := list.(*corev1.NodeList)
	l.Items = append([]corev1.Node(nil), p.nodes[start:end]...)
	if end < len(p.nodes) {
		l.Continue = strconv.Itoa(end)
	}
	p.pages++
	return nil
}

// The first look reads every page of the live list, and takes as written
// exactly the nodes the cache has at another version.
func TestPrimeReadsEveryPage(t *testing.T) {
	g := NewWithT(t)
	const n = 2*primePage + 50
	cached, live := make([]corev1.Node, n), make([]corev1.Node, n)
	for i := range n {
		cached[i] = corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), UID: types.UID(fmt.Sprint(i)), ResourceVersion: "1"}}
		live[i] = *cached[i].DeepCopy()
	}
	behind := []int{0, primePage, n - 1}
	for _, i := range behind {
		live[i].ResourceVersion = "2"
	}
	listed := make([]*corev1.Node, n)
	for i := range cached {
		listed[i] = &cached[i]
	}
	reader := &pagedNodes{nodes: live}
	r := &Reconciler{APIReader: reader}
	g.Expect(r.prime(context.Background(), listed)).To(Succeed())
	g.Expect(reader.pages).To(Equal(3))
	nodes, replaced := r.written.current(listed)
	g.Expect(replaced).To(Equal(len(behind)))
	for _, i := range behind {
		g.Expect(nodes[i].ResourceVersion).To(Equal("2"), nodes[i].Name)
	}
}
