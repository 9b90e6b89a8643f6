package upgrade

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// driverDeletions records, from a watch on driver pods, every driver pod
// deletion and the upgrade state its node was in when it was seen: the
// rule is that a running driver is only ever replaced at the upgrade's
// pod-restart-required step.
type driverDeletions struct {
	mu       sync.Mutex
	seen     map[string]bool
	breaches []string
	count    int
}

func recordDriverDeletions(f *controllertest.Fixture) *driverDeletions {
	ctx, cancel := context.WithCancel(f.Ctx)
	d := &driverDeletions{seen: map[string]bool{}}
	w, err := suite.WatchClient.Watch(ctx, &corev1.PodList{}, client.InNamespace(controllertest.Namespace),
		client.MatchingLabels{render.LabelState: "driver"})
	if err != nil {
		f.T.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			d.observe(ctx, p)
		}
	}()
	f.T.Cleanup(cancel)
	return d
}

func (d *driverDeletions) observe(ctx context.Context, p *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[string(p.UID)] {
		return
	}
	d.seen[string(p.UID)] = true
	d.count++
	n := &corev1.Node{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
		d.breaches = append(d.breaches, fmt.Sprintf("pod %s deleted, node %s unreadable: %v", p.Name, p.Spec.NodeName, err))
		return
	}
	if st := gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]); st != gpuv1.UpgradePodRestart {
		d.breaches = append(d.breaches, fmt.Sprintf("driver pod %s on node %s deleted in upgrade state %q", p.Name, n.Name, st))
	}
}

func (d *driverDeletions) results() (int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, append([]string(nil), d.breaches...)
}

// driverOwners returns, per node, the DaemonSet that owns its driver pod.
func driverOwners(f *controllertest.Fixture) map[string]string {
	pods := &corev1.PodList{}
	if err := suite.Client.List(f.Ctx, pods, client.InNamespace(controllertest.Namespace), client.MatchingLabels{render.LabelState: "driver"}); err != nil {
		f.T.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		owner := "none"
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = ref.Name
		}
		out[p.Spec.NodeName] = owner
	}
	return out
}

// Switching driver.version from a tag to a digest renames every driver
// DaemonSet (one per OS becomes one for all). The pruned DaemonSets used to
// take every driver pod with them at once; now each node is upgraded in
// turn, within the budget (issue 12, finding 1).
func TestDigestSwitchReplacesDriversThroughTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 3)
	f.ExpectAllReady(f.Nodes...)
	deletions := recordDriverDeletions(f)
	log := f.RecordUpgrades()

	digest := gpuv1.DriverVersion("sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	f.UpdatePolicy(controllertest.NewVersion(digest))
	for _, n := range f.Nodes {
		f.ExpectUpgraded(log, n)
	}
	f.ExpectAllReady(f.Nodes...)
	t.Logf("digest switch of %d nodes, as the nodes' labels went:\n%s", len(f.Nodes), log)
	g.Expect(log.Peak()).To(Equal(1), "maxParallelUpgrades is 1")
	for _, n := range f.Nodes {
		g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(n) }, controllertest.Timeout, controllertest.Interval).
			Should(Equal(controllertest.FullUpgrade), "node %s (the log's watch catches up with the reads)", n)
		g.Expect(f.Node(n).Spec.Unschedulable).To(BeFalse())
	}
	g.Eventually(func() map[string]string { return driverOwners(f) }, controllertest.Timeout, controllertest.Interval).Should(HaveLen(len(f.Nodes)))
	g.Expect(driverOwners(f)).To(HaveEach(Equal("nvidia-driver-daemonset")))
	count, breaches := deletions.results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(Equal(len(f.Nodes)), "one driver replaced per node")
}

// A node moved into another pool keeps its running driver until its
// upgrade replaces it: the old pool's DaemonSet no longer deletes it the
// moment the node's labels change.
func TestPoolMoveReplacesTheDriverThroughTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
			{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}, Version: "550.54.15"},
		}
	})
	f.ExpectAllReady(f.Nodes...)
	moved := f.Nodes[1]
	f.ExpectLabel(moved, gpuv1.LabelDriverPool, "default")
	deletions := recordDriverDeletions(f)
	log := f.RecordUpgrades()

	f.SetLabel(moved, "gpu", "a100")
	f.ExpectUpgraded(log, moved)
	f.ExpectLabel(moved, gpuv1.LabelDriverPool, "a100")
	f.ExpectLabel(moved, gpuv1.LabelDriverVersion, "550.54.15")
	f.ExpectAllReady(f.Nodes...)
	t.Logf("pool move, as the nodes' labels went:\n%s", log)
	g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(moved) }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(controllertest.FullUpgrade), "the log's watch catches up with the reads")
	g.Expect(log.Sequence(f.Nodes[0])).To(BeEmpty(), "the other node is not touched")
	count, breaches := deletions.results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(Equal(1))
}
