//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

const rolloutTimeout = 3 * time.Minute

// caughtUp bounds the wait for a spec's watch log to deliver what the
// spec's reads already saw: a watch delivers after a Get returns.
const caughtUp = 30 * time.Second

// InstallInput is how the chart is installed, and what its notes must say
// and must not.
type InstallInput struct {
	HelmArgs []string
	Notes    []string
	Absent   []string
}

// InstallSpec installs the chart with helm and starts the operator.
func InstallSpec(in InstallInput) {
	args := append([]string{"install", "gpu-operator", "deployments/gpu-operator", "-n", "gpu-operator", "--create-namespace", "--wait=false"}, in.HelmArgs...)
	out, err := sh("bin/helm", args...)
	Expect(err).NotTo(HaveOccurred())
	for _, n := range in.Notes {
		Expect(out).To(ContainSubstring(n), "helm install's notes")
	}
	for _, n := range in.Absent {
		Expect(out).NotTo(ContainSubstring(n), "helm install's notes")
	}
	op = startOperator()
}

// AllReadyInput names nodes that must end up ready on every state.
type AllReadyInput struct {
	Nodes []string
}

// AllReadySpec waits until every given node is ready on every state, with
// a pod of each state there (a state stays ready for the grace period while
// a rolling update replaces its pod), then checks that on each node every
// operand pod was created only after its prerequisites were ready there.
func AllReadySpec(ctx context.Context, in AllReadyInput) {
	waitAllReady(ctx, in.Nodes)
	expectOrder(ctx, in.Nodes)
}

// waitAllReady waits until every given node is ready on every state, with
// a pod of each state there.
func waitAllReady(ctx context.Context, nodes []string) {
	in := AllReadyInput{Nodes: nodes}
	Eventually(func(g Gomega) {
		for _, n := range in.Nodes {
			labels := node(g, ctx, n).Labels
			for _, s := range append(states, proofState) {
				g.Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel(s), "ready"), "node %s", n)
				g.Expect(podOn(ctx, n, s)).NotTo(BeNil(), "%s pod on %s", s, n)
			}
		}
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
}

// expectOrder checks the pods on the nodes against the label history: each
// was created after the states before it were ready there (by revision,
// revisions_test.go). A pod created before the node's history was
// forgotten (a reboot) that the kubelet restarted in place started when it
// was ready again, which the operator judges by time.
func expectOrder(ctx context.Context, nodes []string) {
	for _, n := range nodes {
		forgot, reset := history.forgotten(n)
		for state, prereqs := range prerequisites {
			// A DaemonSet still rolling a change of a spec before this
			// one replaces its pod between the wait and this look: the
			// new pod is checked, once there.
			var pod *corev1.Pod
			Eventually(func() *corev1.Pod { pod = podOn(ctx, n, state); return pod }).WithContext(ctx).
				WithTimeout(time.Minute).WithPolling(time.Second).ShouldNot(BeNil(), "%s pod on %s", state, n)
			var created int64
			Eventually(func() (ok bool) { created, ok = creations.of(pod); return ok }).WithTimeout(caughtUp).
				Should(BeTrue(), "the watch delivered the creation of %s", pod.Name)
			if reset && created < forgot {
				expectRestartedAfter(ctx, n, state, pod, prereqs)
				continue
			}
			for _, p := range prereqs {
				var readyAt int64
				Eventually(func() (ok bool) { readyAt, ok = history.firstRevision(n, p, "ready"); return ok }).
					WithTimeout(caughtUp).Should(BeTrue(), "%s was never seen ready on %s", p, n)
				Expect(created).To(BeNumerically(">", readyAt),
					"%s pod %s on %s created (revision %d) before %s was ready there (revision %d)", state, pod.Name, n, created, p, readyAt)
			}
		}
	}
}

// expectRestartedAfter checks a pod the kubelet restarted in place after a
// reboot: it became ready again once its prerequisites were. The operator
// takes a pod restarted in the second it found a prerequisite ready as
// after it, and the watch sees that decision's write up to a second
// later; the API's times have whole seconds.
func expectRestartedAfter(ctx context.Context, node, state string, pod *corev1.Pod, prereqs []string) {
	started := readySince(pod)
	Expect(started.IsZero()).To(BeFalse(), "%s pod %s on %s, from before the reboot, is ready again (phase %s); the node's %s pods:\n%s",
		state, pod.Name, node, pod.Status.Phase, state, describePods(ctx, node, state))
	for _, p := range prereqs {
		readyAt, ok := history.firstSeen(node, p, "ready")
		Expect(ok).To(BeTrue(), "%s was never seen ready on %s", p, node)
		Expect(started).To(BeTemporally(">=", readyAt.Truncate(time.Second).Add(-time.Second)),
			"%s pod %s on %s restarted before %s was ready there", state, pod.Name, node, p)
	}
}

// describePods lists a state's pods on a node, those being deleted too,
// with what a failure needs: phase, creation revision, the proof's
// generation; then the node's boot ID and state label.
func describePods(ctx context.Context, nodeName, state string) string {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace("gpu-operator"), client.MatchingLabels{render.LabelState: state}); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != nodeName {
			continue
		}
		rev, _ := creations.of(p)
		fmt.Fprintf(&b, "  %s phase=%s created=%s revision=%d deleting=%t generation=%s\n", p.Name, p.Status.Phase,
			p.CreationTimestamp.Format(time.RFC3339), rev, p.DeletionTimestamp != nil, p.Annotations[cudaworkload.AnnotationGeneration])
	}
	n := &corev1.Node{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: nodeName}, n); err == nil {
		fmt.Fprintf(&b, "  node boot ID %s, %s=%s", n.Status.NodeInfo.BootID, gpuv1.StateLabel(state), n.Labels[gpuv1.StateLabel(state)])
	}
	return b.String()
}

// readySince is when the pod's Ready condition last became true; zero if it
// is not ready.
func readySince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// BrokenNodeInput names a node whose driver never becomes ready.
type BrokenNodeInput struct {
	Node    string
	Healthy []string
	// ReadyNodes is what the policy's status counts: ready/GPU nodes.
	ReadyNodes string
}

// BrokenNodeSpec checks that the broken node holds nobody back, runs
// nothing after its driver, and is named in the ClusterPolicy's status.
func BrokenNodeSpec(ctx context.Context, in BrokenNodeInput) {
	AllReadySpec(ctx, AllReadyInput{Nodes: in.Healthy})
	Consistently(func(g Gomega) {
		labels := node(g, ctx, in.Node).Labels
		g.Expect(labels[gpuv1.StateLabel("driver")]).NotTo(Equal("ready"))
		g.Expect(podOn(ctx, in.Node, "device-plugin")).To(BeNil())
	}).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		cp := policy(g, ctx)
		c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(in.Node))
		g.Expect(cp.Status.ReadyNodes).To(Equal(in.ReadyNodes))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	KubectlGPUSpec(ctx, in.Node, in.ReadyNodes)
}

// RebootInput names nodes to reboot.
type RebootInput struct {
	Nodes []string
}

// RebootSpec reboots nodes: their chains reset and form again in order.
func RebootSpec(ctx context.Context, in RebootInput) {
	for _, n := range in.Nodes {
		history.forget(n)
	}
	_, err := sh("hack/sim/reboot.sh", in.Nodes...)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() bool {
		for _, n := range in.Nodes {
			if _, ok := history.firstSeen(n, "driver", "pending"); !ok {
				return false
			}
		}
		return true
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the reboot reset every chain")
	AllReadySpec(ctx, AllReadyInput{Nodes: in.Nodes})
}

// CrashInput is a rollout to interrupt by killing the operator.
type CrashInput struct {
	Nodes []string
}

// OperatorCrashSpec starts a rollout on every node (a reboot of all of
// them), SIGKILLs the operator in the middle of it, starts it again, and
// checks that it resumes: everything ready, nothing out of order.
func OperatorCrashSpec(ctx context.Context, in CrashInput) {
	for _, n := range in.Nodes {
		history.forget(n)
	}
	_, err := sh("hack/sim/reboot.sh", in.Nodes...)
	Expect(err).NotTo(HaveOccurred())
	// The kill follows the fact at once; the timeout only bounds a rollout
	// that never starts, and a rebooted chain on a loaded machine may take
	// as long as any rollout (30 s was too short once in CI).
	Eventually(func() bool {
		_, ok := history.firstSeen(in.Nodes[0], "driver", "ready")
		return ok
	}).WithTimeout(rolloutTimeout).WithPolling(50*time.Millisecond).Should(BeTrue(), "the rollout started")
	op.kill()
	op = startOperator()
	AllReadySpec(ctx, AllReadyInput{Nodes: in.Nodes})
}

// HelmUpgradeInput is a value to change with helm upgrade.
type HelmUpgradeInput struct {
	Set      string
	Disabled string // state the change disables
	Nodes    []string
}

// HelmUpgradeSpec changes a value with helm upgrade (the setup hook runs
// again) and checks the state it disables is gone from every node.
func HelmUpgradeSpec(ctx context.Context, in HelmUpgradeInput) {
	helmSet(in.Set)
	Eventually(func(g Gomega) {
		for _, n := range in.Nodes {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel(in.Disabled), "disabled"))
			g.Expect(podOn(ctx, n, in.Disabled)).To(BeNil())
		}
	}).WithTimeout(rolloutTimeout).Should(Succeed())
}

// UninstallSpec uninstalls the chart: the cleanup hook deletes the
// ClusterPolicy while the operator runs, and nothing of the operator is
// left on any node or in the namespace.
func UninstallSpec(ctx context.Context) {
	_, err := sh("bin/helm", "uninstall", "gpu-operator", "-n", "gpu-operator", "--timeout=3m")
	Expect(err).NotTo(HaveOccurred())
	op.kill()
	op = nil
	// The hook returned once the policy was gone: nothing the operator,
	// GFD (through NFD) or mig-manager published is left on any node, with
	// no wait. A person's nvidia.com/mig.config stays, and so do the MIG
	// devices and a person's opt-out (a deploy label not "true": the
	// operator writes only "true", and never a person's value).
	nodes := &corev1.NodeList{}
	Expect(k8s.List(ctx, nodes)).To(Succeed())
	for _, n := range nodes.Items {
		for k, v := range n.Labels {
			optOut := strings.HasPrefix(k, gpuv1.DeployLabelPrefix) && v != gpuv1.LabelTrue
			if strings.HasPrefix(k, "nvidia.com/") && !optOut {
				Expect(k).To(Equal(gpuv1.LabelMIGConfig), "node %s kept %s", n.Name, k)
			}
		}
		for k := range n.Annotations {
			Expect(strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix)).To(BeFalse(), "node %s kept %s", n.Name, k)
			Expect(strings.HasPrefix(k, gpuv1.MIGReconfigureAnnotationPrefix)).To(BeFalse(), "node %s kept %s", n.Name, k)
		}
		Expect(nfd.PublishedLabels(n.Annotations)).NotTo(ContainElement(HavePrefix("nvidia.com/")), "node %s", n.Name)
		for _, own := range []func(corev1.Taint) bool{gating.IsOwnReadinessTaint, gating.IsOwnUnhealthyTaint, gating.IsOwnMIGTaint} {
			Expect(slices.ContainsFunc(n.Spec.Taints, own)).To(BeFalse(), "node %s kept the operator's taint: %v", n.Name, n.Spec.Taints)
		}
	}
	for _, list := range []client.ObjectList{&appsv1.DaemonSetList{}, &appsv1.DeploymentList{}, &corev1.ServiceAccountList{}} {
		Expect(k8s.List(ctx, list, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy})).To(Succeed())
		Expect(meta.LenList(list)).To(BeZero(), "%T left behind", list)
	}
	pods := &corev1.PodList{}
	Eventually(func() int {
		Expect(k8s.List(ctx, pods, client.InNamespace("gpu-operator"))).To(Succeed())
		return len(pods.Items)
	}).WithTimeout(time.Minute).Should(BeZero())
}

func node(g Gomega, ctx context.Context, name string) *corev1.Node {
	n := &corev1.Node{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

func policy(g Gomega, ctx context.Context) *gpuv1.ClusterPolicy {
	cp := &gpuv1.ClusterPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster-policy"}, cp)).To(Succeed())
	return cp
}

// podOn returns the live pod of a state on a node, or nil.
func podOn(ctx context.Context, nodeName, state string) *corev1.Pod {
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace("gpu-operator"), client.MatchingLabels{render.LabelState: state})).To(Succeed())
	// The newest: a run-once state (the CUDA workload proof) keeps its
	// last pod until the next one exists, which may be of the same second.
	var newest *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == nodeName && p.DeletionTimestamp == nil && (newest == nil || creations.newer(p, newest)) {
			newest = p
		}
	}
	return newest
}

// watchNodes calls observe with each version of the named nodes the API
// server sends (every node when names is empty) until ctx ends.
func watchNodes(ctx context.Context, names []string, observe func(*corev1.Node)) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	follow(ctx, k8s, &corev1.NodeList{}, func(_ watch.EventType, o client.Object) {
		if n, ok := o.(*corev1.Node); ok && (len(want) == 0 || want[n.Name]) {
			observe(n)
		}
	})
}
