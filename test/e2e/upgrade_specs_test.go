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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// UpgradeInput is a driver upgrade to roll out.
type UpgradeInput struct {
	// Versions are the versions to upgrade to: the first one the policy
	// does not pin already.
	Versions []string
	Nodes    []string
	// Skip names nodes labelled out of the upgrade.
	Skip []string
	// Workloads is how many GPU pods run during the upgrade.
	Workloads int32
	// KillAt SIGKILLs the operator when a node first reaches this step;
	// empty for no crash.
	KillAt gpuv1.UpgradeState
	// MaxInProgress is the budget: maxParallelUpgrades.
	MaxInProgress int
}

// UpgradeSpec changes driver.version and checks the rolling upgrade: never
// more nodes at once than the budget, GPU workload pods evicted and
// rescheduled, every node on the new driver, cordons restored.
func UpgradeSpec(ctx context.Context, in UpgradeInput) {
	var version string
	current := string(activePolicy(Default, ctx).Spec.Driver.Version)
	for _, v := range in.Versions {
		if v != current {
			version = v
			break
		}
	}
	Expect(version).NotTo(BeEmpty(), "every version of %v is the current one", in.Versions)
	for _, n := range in.Skip {
		_, err := sh("bin/kubectl", "label", "node", n, gpuv1.LabelUpgradeSkip+"=true", "--overwrite")
		Expect(err).NotTo(HaveOccurred())
	}
	before := gpuWorkload(ctx, in.Workloads)
	watch := watchUpgrades(ctx, append(slices.Clone(in.Nodes), in.Skip...))
	defer watch.stop()

	patch := fmt.Sprintf(`{"spec":{"driver":{"version":%q}}}`, version)
	_, err := sh("bin/kubectl", "patch", "clusterpolicy", "cluster-policy", "--type=merge", "-p", patch)
	Expect(err).NotTo(HaveOccurred())
	if in.KillAt != "" {
		Eventually(func() bool { return watch.reached(in.KillAt) }).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(BeTrue())
		op.kill()
		op = startOperator()
	}

	Eventually(func(g Gomega) {
		for _, n := range in.Nodes {
			node := node(g, ctx, n)
			g.Expect(node.Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, "upgrade-done"), "node %s (waiting: %q); the fleet: %s",
				n, node.Annotations[gpuv1.AnnotationMaintenanceWaiting], fleetUpgrades(ctx))
			g.Expect(node.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverVersion, version), "node %s", n)
			g.Expect(node.Spec.Unschedulable).To(BeFalse(), "node %s is still cordoned", n)
		}
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	Expect(watch.peak()).To(BeNumerically("<=", in.MaxInProgress), "nodes upgrading at once")
	// A skipped node stays out of upgrades, as NVIDIA's upgrade
	// controller leaves it: on its old driver, its label as it was
	// (upgrade-done since its first driver pod ran, never required).
	for _, n := range in.Skip {
		skipped := node(Default, ctx, n)
		Expect(skipped.Labels[gpuv1.LabelDriverVersion]).NotTo(Equal(version), "skipped node %s", n)
		Expect(skipped.Labels[gpuv1.LabelUpgradeState]).To(BeElementOf("", string(gpuv1.UpgradeDone)), "skipped node %s", n)
		Expect(watch.enteredBy(n)).To(BeEmpty(), "skipped node %s went through upgrade states", n)
	}

	// The GPU pods were evicted from every upgraded node and run again.
	upgraded := map[string]bool{}
	for _, n := range in.Nodes {
		upgraded[n] = true
	}
	Eventually(func(g Gomega) {
		after := workloadPods(g, ctx)
		g.Expect(after).To(HaveLen(int(in.Workloads)))
		for uid, p := range before {
			if upgraded[p.node] {
				g.Expect(after).NotTo(HaveKey(uid), "pod %s on %s was never evicted", p.name, p.node)
			}
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	AllReadySpec(ctx, AllReadyInput{Nodes: in.Nodes})
}

// workloadPod is a running GPU workload pod.
type workloadPod struct{ name, node string }

// gpuWorkload runs (or keeps) a Deployment of GPU pods and returns its pods
// by UID once they all run.
func gpuWorkload(ctx context.Context, replicas int32) map[string]workloadPod {
	createGPUDeployment(ctx, "workloads", "training", replicas, nil)
	var pods map[string]workloadPod
	Eventually(func(g Gomega) {
		pods = workloadPods(g, ctx)
		g.Expect(pods).To(HaveLen(int(replicas)))
	}).WithTimeout(time.Minute).Should(Succeed())
	return pods
}

// workloadPods returns the running GPU workload pods by UID.
func workloadPods(g Gomega, ctx context.Context) map[string]workloadPod {
	list := &corev1.PodList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace("workloads"))).To(Succeed())
	pods := map[string]workloadPod{}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			pods[string(p.UID)] = workloadPod{name: p.Name, node: p.Spec.NodeName}
		}
	}
	return pods
}

// upgradeWatch follows the nodes' upgrade states from a watch while an
// upgrade runs. A watch delivers every change in the order the API server
// stored them, so the peak of nodes in an upgrade at once is exact: no
// overlap shorter than a polling interval goes unseen.
type upgradeWatch struct {
	mu       sync.Mutex
	seen     map[gpuv1.UpgradeState]bool
	current  map[string]gpuv1.UpgradeState
	entered  map[string][]gpuv1.UpgradeState // by node: the states of an upgrade it entered
	maxAtOne int
	cancel   context.CancelFunc
}

func watchUpgrades(ctx context.Context, nodes []string) *upgradeWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &upgradeWatch{seen: map[gpuv1.UpgradeState]bool{}, current: map[string]gpuv1.UpgradeState{},
		entered: map[string][]gpuv1.UpgradeState{}, cancel: cancel}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	events, err := k8s.Watch(ctx, &corev1.NodeList{})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer events.Stop()
		for ev := range events.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || !want[n.Name] {
				continue
			}
			w.observe(n.Name, gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]))
		}
	}()
	return w
}

func (w *upgradeWatch) observe(node string, st gpuv1.UpgradeState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[st] = true
	w.current[node] = st
	if st != "" && st != gpuv1.UpgradeDone {
		w.entered[node] = append(w.entered[node], st)
	}
	busy := 0
	for _, s := range w.current {
		if upgrade.InProgress(s) {
			busy++
		}
	}
	w.maxAtOne = max(w.maxAtOne, busy)
}

func (w *upgradeWatch) reached(s gpuv1.UpgradeState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[s]
}

func (w *upgradeWatch) enteredBy(node string) []gpuv1.UpgradeState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.entered[node])
}

func (w *upgradeWatch) peak() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxAtOne
}

func (w *upgradeWatch) stop() { w.cancel() }

// createGPUDeployment creates (or keeps) a Deployment of pods that ask for
// one GPU each and tolerate the common nvidia.com/gpu taint, in namespace,
// with affinity when not nil.
func createGPUDeployment(ctx context.Context, namespace, name string, replicas int32, affinity *corev1.Affinity) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity:    affinity,
					Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "train", Image: "cuda", Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
					}}},
				},
			},
		},
	}
	if err := k8s.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	// A spec that fails before deleting its GPU pods must not leave them to
	// the next spec on this cluster, whose nodes would count them.
	DeferCleanup(func(ctx SpecContext) {
		err := k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
	})
}

// fleetUpgrades lists every node's upgrade state, cordon and driver pool:
// what holds an upgrade budget.
func fleetUpgrades(ctx context.Context) string {
	list := &corev1.NodeList{}
	if err := k8s.List(ctx, list); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, n := range list.Items {
		fmt.Fprintf(&b, "\n  %s: upgrade=%q pool=%q driver=%q cordoned=%t remediation=%q mig=%q", n.Name, n.Labels[gpuv1.LabelUpgradeState],
			n.Labels[gpuv1.LabelDriverPool], n.Labels[gpuv1.StateLabel("driver")], n.Spec.Unschedulable,
			n.Labels[gpuv1.LabelRemediationState], n.Labels[gpuv1.LabelMIGReconfigureState])
	}
	return b.String()
}
