//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// MIGInput names the nodes MIGSpec reconfigures: Nodes apply as they
// should, FailOnce's first mig-manager reports failed, HangOnce's first
// never reports at all.
type MIGInput struct {
	Nodes              []string
	FailOnce, HangOnce string
}

// The steps of a reconfiguration that goes as it should.
var migSteps = []gpuv1.MIGReconfigureState{"", gpuv1.MIGReconfigureRequired, gpuv1.MIGEviction, gpuv1.MIGClientsOff,
	gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone}

// migRetried are the steps of a node whose first attempt failed or hung:
// back to clients-off, where the attempt's mig-manager pod leaves, then
// a second apply.
var migRetried = slices.Concat(migSteps[:5], []gpuv1.MIGReconfigureState{gpuv1.MIGClientsOff, gpuv1.MIGApply}, migSteps[5:])

// MIGSpec turns migManager on: the simulated GPUs, MIG-capable with MIG
// off, are taken as all-disabled already, and nothing restarts. Then
// nodes are labelled nvidia.com/mig.config=all-1g.18gb at once, with GPU
// pods pinned to them and maxParallel 1: one node at a time is tainted,
// its GPU pods evicted, its device plugin, GFD and dcgm-exporter taken
// off, mig-manager run, and the node untainted once its 56 MIG devices are
// advertised. A mig-manager that fails once, and one that hangs, are
// retried with a new pod; the operator is killed (SIGKILL) while the
// first node applies, and the restarted one takes every node on from its
// label. The driver stays on every node. The nodes then go back to whole
// GPUs, all at once, and migManager is turned off.
func MIGSpec(ctx context.Context, in MIGInput) {
	all := append(slices.Clone(in.Nodes), in.FailOnce, in.HangOnce)
	// The specs before may have moved the device plugin (time-slicing):
	// every node is ready again first.
	AllReadySpec(ctx, AllReadyInput{Nodes: all})
	plugins, drivers := map[string]types.UID{}, map[string]types.UID{}
	for _, n := range all {
		plugins[n] = operandPodOn(ctx, n, state.DevicePlugin).UID
		drivers[n] = operandPodOn(ctx, n, state.Driver).UID
	}
	setMIGManager(ctx, func(s *gpuv1.MIGManagerSpec) {
		s.Enabled = ptr.To(true)
		s.MaxParallel = ptr.To(intstr.FromInt32(1))
		// Long enough for an apply under load, short enough that the hung
		// attempt costs the suite little (the floor is the suite's timer).
		s.ApplyTimeoutSeconds = ptr.To[int32](20)
	})
	for _, n := range all {
		Eventually(func(g Gomega) {
			g.Expect(node(g, ctx, n).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-disabled"))
		}).WithTimeout(2*time.Minute).Should(Succeed(), "node %s takes the default as applied", n)
		Expect(operandPodOn(ctx, n, state.DevicePlugin).UID).To(Equal(plugins[n]), "nothing restarts on %s", n)
	}

	pinnedGPUPods(ctx, "mig", in.Nodes, 3)
	before := runningPods(ctx, "mig", 3)
	setSimAnnotation(ctx, in.FailOnce, fakenode.AnnotationMIGApply, fakenode.MIGFailOnce)
	setSimAnnotation(ctx, in.HangOnce, fakenode.AnnotationMIGApply, fakenode.MIGHangOnce)
	log := watchMIG(ctx, all)
	defer log.stop()
	for _, n := range all {
		setNodeLabel(ctx, n, gpuv1.LabelMIGConfig, "all-1g.18gb")
	}
	Eventually(func(g Gomega) {
		g.Expect(log.anyAt(gpuv1.MIGApply)).To(BeTrue())
	}).WithTimeout(3*time.Minute).WithPolling(50*time.Millisecond).Should(Succeed(), "as it went:\n%s", log)
	op.kill()
	op = startOperator()

	for _, n := range all {
		Eventually(func(g Gomega) {
			g.Expect(nodeLabel(g, ctx, n, gpuv1.LabelMIGReconfigureState)).To(Equal(string(gpuv1.MIGReconfigureDone)))
		}).WithTimeout(8*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s, as it went:\n%s", n, log)
	}
	GinkgoWriter.Printf("MIG reconfiguration, one node at a time:\n%s\n", log)
	Expect(log.peak()).To(Equal(1), "maxParallel is 1:\n%s", log)
	Expect(log.offTaints()).To(BeEmpty(), "tainted exactly from the eviction to the end")
	for _, n := range all {
		want := migSteps
		if n == in.FailOnce || n == in.HangOnce {
			want = migRetried
		}
		Eventually(func() []gpuv1.MIGReconfigureState { return log.sequence(n) }).WithTimeout(caughtUp).
			Should(Equal(want), "node %s (the log's watch catches up with the reads):\n%s", n, log)
		expectMIGPartitioned(ctx, n)
		Expect(operandPodOn(ctx, n, state.Driver).UID).To(Equal(drivers[n]), "the driver stays on %s", n)
	}
	Expect(strings.Join(eventsOn(ctx, in.FailOnce), "\n")).To(ContainSubstring("attempt 1 of 3: mig-manager reported failed"))
	Expect(strings.Join(eventsOn(ctx, in.HangOnce), "\n")).To(ContainSubstring("attempt 1 of 3: no result within 20s"))
	// The GPU pods were evicted, not deleted, and run again.
	after := runningPods(ctx, "mig", 3)
	for uid := range before {
		Expect(after).NotTo(HaveKey(uid), "every GPU pod on a reconfigured node was evicted")
	}
	GinkgoWriter.Printf("MIG labels: %s\n", migLabels(ctx, all...))
	Expect(k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "mig"}})).To(Succeed())

	// Whole GPUs again, every node at once (100%), for the specs after.
	setMIGManager(ctx, func(s *gpuv1.MIGManagerSpec) { s.MaxParallel = ptr.To(intstr.FromString("100%")) })
	for _, n := range all {
		setNodeLabel(ctx, n, gpuv1.LabelMIGConfig, "all-disabled")
	}
	for _, n := range all {
		Eventually(func(g Gomega) {
			got := node(g, ctx, n)
			g.Expect(got.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-disabled"))
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)))
			g.Expect(got.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
		}).WithTimeout(3*time.Minute).Should(Succeed(), "node %s:\n%s", n, log)
	}

	// Off: the GPUs stay as they are; the operator's marks go, but for
	// the record of what is applied.
	setMIGManager(ctx, func(s *gpuv1.MIGManagerSpec) { s.Enabled = ptr.To(false) })
	for _, n := range all {
		setNodeLabel(ctx, n, gpuv1.LabelMIGConfig, "")
	}
	Eventually(func(g Gomega) {
		for _, n := range all {
			got := node(g, ctx, n)
			g.Expect(got.Labels).NotTo(HaveKey(gpuv1.LabelMIGReconfigureState))
			g.Expect(got.Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
			g.Expect(got.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-disabled"))
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	AllReadySpec(ctx, AllReadyInput{Nodes: all})
}

func setMIGManager(ctx context.Context, mutate func(*gpuv1.MIGManagerSpec)) {
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { mutate(&cp.Spec.MIGManager) })
}

func migLabels(ctx context.Context, nodes ...string) string {
	var out string
	for _, name := range nodes {
		n := getNode(ctx, name)
		out += fmt.Sprintf("\n  %s: %s=%s %s=%s nvidia.com/gpu=%s nvidia.com/gpu.product=%s", name,
			gpuv1.LabelMIGConfig, n.Labels[gpuv1.LabelMIGConfig], gpuv1.LabelMIGConfigState, n.Labels[gpuv1.LabelMIGConfigState],
			n.Status.Allocatable.Name("nvidia.com/gpu", "").String(), n.Labels["nvidia.com/gpu.product"])
	}
	return out
}

// eventsOn returns the messages of the events on a node.
func eventsOn(ctx context.Context, name string) []string {
	list := &corev1.EventList{}
	Expect(k8s.List(ctx, list, client.MatchingFields{"involvedObject.name": name})).To(Succeed())
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// migLog follows the nodes' reconfiguration labels and taints from a
// watch: the sequence of each node, the most nodes tainted at once, and
// any version where the taint and the label disagree for longer than
// between two of the operator's writes.
type migLog struct {
	mu       sync.Mutex
	start    time.Time
	nodes    map[string]bool
	seq      map[string][]gpuv1.MIGReconfigureState
	current  map[string]string
	tainted  map[string]bool
	then     map[string]string
	lines    []string
	off      []string
	maxBusy  int
	stopFunc context.CancelFunc
}

func watchMIG(ctx context.Context, nodes []string) *migLog {
	ctx, cancel := context.WithCancel(ctx)
	l := &migLog{start: time.Now(), nodes: map[string]bool{}, seq: map[string][]gpuv1.MIGReconfigureState{},
		current: map[string]string{}, tainted: map[string]bool{}, then: map[string]string{}, stopFunc: cancel}
	for _, n := range nodes {
		l.nodes[n] = true
	}
	watchNodes(ctx, nodes, l.observe)
	return l
}

func (l *migLog) observe(n *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := gpuv1.MIGReconfigureState(n.Labels[gpuv1.LabelMIGReconfigureState])
	taint := slices.ContainsFunc(n.Spec.Taints, gating.IsOwnMIGTaint)
	l.tainted[n.Name] = taint
	busy := 0
	for _, t := range l.tainted {
		if t {
			busy++
		}
	}
	l.maxBusy = max(l.maxBusy, busy)
	key := fmt.Sprintf("%s %t %s", st, taint, n.Labels[gpuv1.LabelMIGConfigState])
	if l.current[n.Name] == key {
		return
	}
	// The taint goes on just before the label that starts the eviction
	// (or, to apply lost devices again, the clients' leaving) and off
	// just before the label that ends the reconfiguration: a version
	// between the two writes is the operator's order if the next is the
	// label that finishes it.
	stKey := fmt.Sprintf("%s %t", st, taint)
	if want, ok := l.then[n.Name]; ok && !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool { return strings.HasPrefix(key, w) }) {
		l.off = append(l.off, fmt.Sprintf("%s: %s after a version between two writes, not %s", n.Name, stKey, want))
	}
	delete(l.then, n.Name)
	switch {
	case taint == migreconfig.Tainted(st):
	case taint && st == gpuv1.MIGReconfigureRequired:
		l.then[n.Name] = string(gpuv1.MIGEviction) + " true|" + string(gpuv1.MIGClientsOff) + " true"
	case !taint && st == gpuv1.MIGValidation:
		l.then[n.Name] = string(gpuv1.MIGReconfigureDone) + " false"
	default:
		l.off = append(l.off, fmt.Sprintf("%s: %s", n.Name, stKey))
	}
	l.current[n.Name] = key
	if s := l.seq[n.Name]; len(s) == 0 || s[len(s)-1] != st {
		l.seq[n.Name] = append(s, st)
	}
	display := string(st)
	if display == "" {
		display = "(none)"
	}
	l.lines = append(l.lines, fmt.Sprintf("%7.1fs %-12s %-22s tainted=%-5t mig.config.state=%s", time.Since(l.start).Seconds(),
		n.Name, display, taint, n.Labels[gpuv1.LabelMIGConfigState]))
}

func (l *migLog) anyAt(st gpuv1.MIGReconfigureState) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.seq {
		if slices.Contains(s, st) {
			return true
		}
	}
	return false
}

func (l *migLog) sequence(node string) []gpuv1.MIGReconfigureState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seq[node])
}

func (l *migLog) peak() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxBusy
}

func (l *migLog) offTaints() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.off)
}

func (l *migLog) stop() { l.stopFunc() }

func (l *migLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
