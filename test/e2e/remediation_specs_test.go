//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
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
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// The way into every repair, and the steps each recovery takes after it.
var (
	repairStart = []gpuv1.RemediationState{gpuv1.RemediationRequired, gpuv1.RemediationEviction, gpuv1.RemediationDevicePluginRestart}
	reloadSteps = []gpuv1.RemediationState{gpuv1.RemediationDriverReload, gpuv1.RemediationValidation}
)

func steps(parts ...[]gpuv1.RemediationState) []gpuv1.RemediationState {
	return slices.Concat(parts...)
}

func one(s gpuv1.RemediationState) []gpuv1.RemediationState { return []gpuv1.RemediationState{s} }

// RemediationPathsInput names a node for each way its GPUs recover.
type RemediationPathsInput struct {
	PluginRestart, DriverReload, Reboot, Never string
}

// RemediationPathsSpec makes GPUs unhealthy on four nodes at once, each
// healing its own way in the simulator, with GPU pods on them, and follows
// each node's repair on its label (GPU pods pinned to the four nodes run
// there before): the device plugin restart heals the first; the second needs its driver reloaded; the third is marked
// reboot-required and heals once rebooted; the fourth fails after its
// reboot and keeps its taint. The GPU pods are evicted and run again on
// the healed nodes; only the second node's driver pod is replaced. Turning remediation off
// removes the failed node's label and taint.
func RemediationPathsSpec(ctx context.Context, in RemediationPathsInput) {
	nodes := []string{in.PluginRestart, in.DriverReload, in.Reboot, in.Never}
	drivers := map[string]types.UID{}
	for _, n := range nodes {
		drivers[n] = operandPodOn(ctx, n, state.Driver).UID
	}
	pinnedGPUPods(ctx, "repair", nodes, 4)
	before := runningPods(ctx, "repair", 4)
	log := watchRemediations(ctx, nodes)
	defer log.stop()
	setRemediation(ctx, func(s *gpuv1.RemediationSpec) { s.MaxParallel = ptr.To(intstr.FromString("100%")) })
	modes := map[string]string{in.PluginRestart: fakenode.HealOnDevicePluginRestart, in.DriverReload: fakenode.HealOnDriverReload,
		in.Reboot: fakenode.HealOnReboot, in.Never: fakenode.HealNever}
	for _, n := range nodes {
		setSimAnnotation(ctx, n, fakenode.AnnotationUnhealthyUntil, modes[n])
		setSimAnnotation(ctx, n, fakenode.AnnotationUnhealthyGPUs, "2")
	}
	expectRemediation := func(node string, st gpuv1.RemediationState) {
		Eventually(func(g Gomega) {
			g.Expect(nodeLabel(g, ctx, node, gpuv1.LabelRemediationState)).To(Equal(string(st)))
		}).WithTimeout(6*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s, as it went:\n%s", node, log)
	}
	expectRemediation(in.PluginRestart, gpuv1.RemediationDone)
	expectRemediation(in.DriverReload, gpuv1.RemediationDone)
	expectRemediation(in.Reboot, gpuv1.RemediationRebootRequired)
	expectRemediation(in.Never, gpuv1.RemediationRebootRequired)
	_, err := sh("hack/sim/reboot.sh", in.Reboot, in.Never)
	Expect(err).NotTo(HaveOccurred())
	expectRemediation(in.Reboot, gpuv1.RemediationDone)
	expectRemediation(in.Never, gpuv1.RemediationFailed)
	AddReportEntry("remediation timelines", log.String())
	GinkgoWriter.Printf("remediation, as the nodes' labels went:\n%s\n", log)

	// The log's watch delivers after the reads above returned: each check
	// waits for it to catch up.
	Eventually(func() []gpuv1.RemediationState { return log.sequence(in.PluginRestart) }).WithTimeout(caughtUp).
		Should(Equal(steps(repairStart, one(gpuv1.RemediationDone))))
	Eventually(func() []gpuv1.RemediationState { return log.sequence(in.DriverReload) }).WithTimeout(caughtUp).
		Should(Equal(steps(repairStart, reloadSteps, one(gpuv1.RemediationDone))))
	// After the reboot the repair validates the GPUs; a look that finds
	// the device plugin back and every GPU healthy already is that
	// validation, and ends the repair at once (the table answers healed
	// GPUs before a reboot).
	Eventually(func() []gpuv1.RemediationState { return log.sequence(in.Reboot) }).WithTimeout(caughtUp).
		Should(BeElementOf(
			steps(repairStart, reloadSteps, one(gpuv1.RemediationRebootRequired), one(gpuv1.RemediationValidation), one(gpuv1.RemediationDone)),
			steps(repairStart, reloadSteps, one(gpuv1.RemediationRebootRequired), one(gpuv1.RemediationDone))))
	Eventually(func() []gpuv1.RemediationState { return log.sequence(in.Never) }).WithTimeout(caughtUp).
		Should(Equal(steps(repairStart, reloadSteps,
			one(gpuv1.RemediationRebootRequired), one(gpuv1.RemediationValidation), one(gpuv1.RemediationFailed))))
	Eventually(log.taintedOutside).WithTimeout(caughtUp).
		Should(BeEmpty(), "the taint is on from the eviction until the GPUs are healthy, and only then")
	for _, n := range nodes {
		Expect(log.everTainted(n)).To(BeTrue(), "node %s was tainted while repaired", n)
	}
	Expect(operandPodOn(ctx, in.PluginRestart, state.Driver).UID).To(Equal(drivers[in.PluginRestart]), "a plugin restart leaves the driver")
	Expect(operandPodOn(ctx, in.DriverReload, state.Driver).UID).NotTo(Equal(drivers[in.DriverReload]), "the driver was reloaded")
	Eventually(func(g Gomega) {
		for _, n := range nodes {
			g.Expect(nodeEventReasons(g, ctx, n)).To(ContainElement("GPURemediation"), "node %s", n)
		}
		after := runningPods(ctx, "repair", 4)
		for uid := range before {
			g.Expect(after).NotTo(HaveKey(uid), "every GPU pod on a repaired node was evicted")
		}
		for _, node := range after {
			g.Expect(node).NotTo(Equal(in.Never), "no GPU pod runs on the failed node")
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	failed := getNode(ctx, in.Never)
	Expect(failed.Annotations).To(HaveKeyWithValue(gpuv1.RemediationAnnotationPrefix+"reason", ContainSubstring("after a reboot")))

	Expect(k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "repair"}})).To(Succeed())
	setRemediationOff(ctx)
	setSimAnnotation(ctx, in.Never, fakenode.AnnotationUnhealthyGPUs, "")
	expectNoRemediationMarks(ctx)
}

// RemediationApprovalSpec turns autoStart off: a node with unhealthy GPUs
// waits, labelled remediation-required and untainted, until a person
// approves its repair; the approval is spent when the repair starts.
func RemediationApprovalSpec(ctx context.Context, node string) {
	setRemediation(ctx, func(s *gpuv1.RemediationSpec) { s.AutoStart = ptr.To(false) })
	log := watchRemediations(ctx, []string{node})
	defer log.stop()
	setSimAnnotation(ctx, node, fakenode.AnnotationUnhealthyUntil, fakenode.HealOnDevicePluginRestart)
	setSimAnnotation(ctx, node, fakenode.AnnotationUnhealthyGPUs, "1")
	Eventually(func(g Gomega) {
		g.Expect(nodeLabel(g, ctx, node, gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationRequired)))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(nodeLabel(g, ctx, node, gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationRequired)))
		g.Expect(slices.ContainsFunc(getNode(ctx, node).Spec.Taints, gating.IsOwnUnhealthyTaint)).To(BeFalse())
	}).WithTimeout(5*time.Second).Should(Succeed(), "nothing starts without an approval (five looks of the maintenance controller)")
	setSimAnnotation(ctx, node, gpuv1.AnnotationRemediationApproved, gpuv1.LabelTrue)
	Eventually(func(g Gomega) {
		g.Expect(nodeLabel(g, ctx, node, gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationDone)))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	GinkgoWriter.Printf("approved repair:\n%s\n", log)
	Eventually(func() []gpuv1.RemediationState { return log.sequence(node) }).WithTimeout(caughtUp).
		Should(Equal(steps(repairStart, one(gpuv1.RemediationDone))), "the log's watch catches up with the reads")
	Expect(getNode(ctx, node).Annotations).NotTo(HaveKey(gpuv1.AnnotationRemediationApproved), "the approval was spent")
	setRemediationOff(ctx)
	expectNoRemediationMarks(ctx)
}

// RemediationBudgetSpec makes GPUs unhealthy on several nodes at once with
// maxParallel 1: the nodes are repaired one after the other, never two
// out of service at once, repairs and driver upgrades counted together.
// The operator is killed (SIGKILL) as the first repair restarts the device
// plugin, and the restarted one takes each node on from where its label
// says: no step is taken twice, none skipped.
func RemediationBudgetSpec(ctx context.Context, nodes []string) {
	log := watchRemediations(ctx, nodes)
	defer log.stop()
	setRemediation(ctx, func(s *gpuv1.RemediationSpec) { s.MaxParallel = ptr.To(intstr.FromInt32(1)) })
	for _, n := range nodes {
		setSimAnnotation(ctx, n, fakenode.AnnotationUnhealthyUntil, fakenode.HealOnDevicePluginRestart)
		setSimAnnotation(ctx, n, fakenode.AnnotationUnhealthyGPUs, "1")
	}
	Eventually(func(g Gomega) {
		g.Expect(nodeLabel(g, ctx, nodes[0], gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationDevicePluginRestart)))
	}).WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
	op.kill()
	op = startOperator()
	for _, n := range nodes {
		Eventually(func(g Gomega) {
			g.Expect(nodeLabel(g, ctx, n, gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationDone)))
		}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s, as it went:\n%s", n, log)
	}
	GinkgoWriter.Printf("repairs one at a time:\n%s\n", log)
	Expect(log.peak()).To(Equal(1), "maxParallel is 1")
	for _, n := range nodes {
		Eventually(func() []gpuv1.RemediationState { return log.sequence(n) }).WithTimeout(caughtUp).
			Should(Equal(steps(repairStart, one(gpuv1.RemediationDone))), "node %s (the log's watch catches up with the reads)", n)
	}
	setRemediationOff(ctx)
	expectNoRemediationMarks(ctx)
}

func setRemediation(ctx context.Context, mutate func(*gpuv1.RemediationSpec)) {
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Operator.Remediation = gpuv1.RemediationSpec{Enabled: true}
		mutate(&cp.Spec.Operator.Remediation)
	})
}

func setRemediationOff(ctx context.Context) {
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.Remediation.Enabled = false })
}

// expectNoRemediationMarks waits until no node carries a remediation
// label, annotation or the operator's unhealthy taint.
func expectNoRemediationMarks(ctx context.Context) {
	Eventually(func(g Gomega) {
		list := &corev1.NodeList{}
		g.Expect(k8s.List(ctx, list)).To(Succeed())
		for _, n := range list.Items {
			g.Expect(n.Labels).NotTo(HaveKey(gpuv1.LabelRemediationState), "node %s", n.Name)
			g.Expect(slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint)).To(BeFalse(), "node %s", n.Name)
			for k := range n.Annotations {
				g.Expect(strings.HasPrefix(k, gpuv1.RemediationAnnotationPrefix)).To(BeFalse(), "node %s: %s", n.Name, k)
			}
		}
	}).WithTimeout(time.Minute).Should(Succeed())
}

func getNode(ctx context.Context, name string) *corev1.Node {
	n := &corev1.Node{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

func nodeLabel(g Gomega, ctx context.Context, node, key string) string {
	n := &corev1.Node{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	return n.Labels[key]
}

// operandPodOn returns a state's live operand pod on a node.
func operandPodOn(ctx context.Context, node string, st state.Name) *corev1.Pod {
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace("gpu-operator"), client.MatchingLabels{render.LabelState: string(st)})).To(Succeed())
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			return p
		}
	}
	Fail(fmt.Sprintf("no %s pod on node %s", st, node))
	return nil
}

// runningPods waits for want running pods in a namespace and returns
// their nodes by UID.
func runningPods(ctx context.Context, namespace string, want int) map[types.UID]string {
	out := map[types.UID]string{}
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(namespace))).To(Succeed())
		clear(out)
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[p.UID] = p.Spec.NodeName
			}
		}
		g.Expect(out).To(HaveLen(want))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	return maps.Clone(out)
}

// remediationLog records, from a watch on nodes, each node's repair
// states in order, whether it carried the unhealthy taint in each version,
// and the most nodes ever out of service at once, repairs and upgrades.
type remediationLog struct {
	mu        sync.Mutex
	start     time.Time
	nodes     map[string]bool
	seq       map[string][]gpuv1.RemediationState
	current   map[string]string
	busy      map[string]bool
	peakBusy  int
	tainted   map[string]bool
	then      map[string]string // after a version between two writes: the change that must come next
	offTaints []string          // versions with the taint outside a tainted state, or the reverse
	lines     []string
	stop      context.CancelFunc
}

func watchRemediations(ctx context.Context, nodes []string) *remediationLog {
	ctx, cancel := context.WithCancel(ctx)
	l := &remediationLog{start: time.Now(), nodes: map[string]bool{}, seq: map[string][]gpuv1.RemediationState{},
		current: map[string]string{}, busy: map[string]bool{}, tainted: map[string]bool{}, then: map[string]string{}, stop: cancel}
	for _, n := range nodes {
		l.nodes[n] = true
	}
	watchNodes(ctx, nil, l.observe)
	return l
}

func (l *remediationLog) observe(n *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := gpuv1.RemediationState(n.Labels[gpuv1.LabelRemediationState])
	l.busy[n.Name] = remediation.InProgress(st) || upgrade.InProgress(gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]))
	busy := 0
	for _, b := range l.busy {
		if b {
			busy++
		}
	}
	l.peakBusy = max(l.peakBusy, busy)
	if !l.nodes[n.Name] {
		return
	}
	taint := slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint)
	l.tainted[n.Name] = l.tainted[n.Name] || taint
	// The taint goes on just before the label that starts the eviction,
	// and off just before the label that ends the repair, from whichever
	// state the repair ends in (a reboot that healed the GPUs ends it from
	// reboot-required): a version between the two writes is the
	// operator's order, not a breach, if the next change is the label
	// that finishes it.
	key := fmt.Sprintf("%s %t", st, taint)
	if l.current[n.Name] == key {
		return
	}
	if want, ok := l.then[n.Name]; ok && key != want {
		l.offTaints = append(l.offTaints, fmt.Sprintf("%s: %s tainted=%t after a version between two writes, not %s", n.Name, st, taint, want))
	}
	delete(l.then, n.Name)
	switch {
	case taint == remediation.Tainted(st):
	case taint && st == gpuv1.RemediationRequired:
		l.then[n.Name] = fmt.Sprintf("%s %t", gpuv1.RemediationEviction, true)
	case !taint && remediation.Tainted(st):
		l.then[n.Name] = fmt.Sprintf("%s %t", gpuv1.RemediationDone, false)
	default:
		l.offTaints = append(l.offTaints, fmt.Sprintf("%s: %s tainted=%t", n.Name, st, taint))
	}
	l.current[n.Name] = key
	if seq := l.seq[n.Name]; st != "" && (len(seq) == 0 || seq[len(seq)-1] != st) {
		l.seq[n.Name] = append(seq, st)
	}
	l.lines = append(l.lines, fmt.Sprintf("%6.1fs %-12s %-32s tainted=%-5t unhealthy-gpus=%s", time.Since(l.start).Seconds(),
		n.Name, displayState(string(st)), taint, n.Annotations[gpuv1.AnnotationUnhealthyGPUs]))
}

func displayState(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func (l *remediationLog) sequence(node string) []gpuv1.RemediationState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seq[node])
}

func (l *remediationLog) peak() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peakBusy
}

func (l *remediationLog) everTainted(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tainted[node]
}

func (l *remediationLog) taintedOutside() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.offTaints)
	for n, want := range l.then {
		out = append(out, fmt.Sprintf("%s: still between two writes, waiting for %s", n, want))
	}
	return out
}

func (l *remediationLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
