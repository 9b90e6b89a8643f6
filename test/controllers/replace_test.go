package controllers

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

func (f *fixture) recordDriverDeletions() *driverDeletions {
	ctx, cancel := context.WithCancel(f.ctx)
	d := &driverDeletions{seen: map[string]bool{}}
	w, err := watchClient.Watch(ctx, &corev1.PodList{}, client.InNamespace(namespace),
		client.MatchingLabels{render.LabelState: "driver"})
	if err != nil {
		f.t.Fatal(err)
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
	f.t.Cleanup(cancel)
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
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
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
func (f *fixture) driverOwners() map[string]string {
	pods := &corev1.PodList{}
	if err := k8sClient.List(f.ctx, pods, client.InNamespace(namespace), client.MatchingLabels{render.LabelState: "driver"}); err != nil {
		f.t.Fatal(err)
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
	f := setup(t, 3)
	f.expectAllReady(f.nodes...)
	deletions := f.recordDriverDeletions()
	log := f.recordUpgrades()

	digest := gpuv1.DriverVersion("sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	f.updatePolicy(newVersion(digest))
	for _, n := range f.nodes {
		f.expectLabel(n, gpuv1.LabelUpgradeState, "upgrade-done")
	}
	f.expectAllReady(f.nodes...)
	t.Logf("digest switch of %d nodes, as the nodes' labels went:\n%s", len(f.nodes), log)
	g.Expect(log.peak()).To(Equal(1), "maxParallelUpgrades is 1")
	for _, n := range f.nodes {
		g.Expect(log.sequence(n)).To(Equal(fullUpgrade), "node %s", n)
		g.Expect(f.node(n).Spec.Unschedulable).To(BeFalse())
	}
	g.Eventually(f.driverOwners, timeout, interval).Should(HaveLen(len(f.nodes)))
	g.Expect(f.driverOwners()).To(HaveEach(Equal("nvidia-driver-daemonset")))
	count, breaches := deletions.results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(Equal(len(f.nodes)), "one driver replaced per node")
}

// A node moved into another pool keeps its running driver until its
// upgrade replaces it: the old pool's DaemonSet no longer deletes it the
// moment the node's labels change.
func TestPoolMoveReplacesTheDriverThroughTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
			{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}, Version: "550.54.15"},
		}
	})
	f.expectAllReady(f.nodes...)
	moved := f.nodes[1]
	f.expectLabel(moved, gpuv1.LabelDriverPool, "default")
	deletions := f.recordDriverDeletions()
	log := f.recordUpgrades()

	f.setLabel(moved, "gpu", "a100")
	f.expectLabel(moved, gpuv1.LabelUpgradeState, "upgrade-done")
	f.expectLabel(moved, gpuv1.LabelDriverPool, "a100")
	f.expectLabel(moved, gpuv1.LabelDriverVersion, "550.54.15")
	f.expectAllReady(f.nodes...)
	t.Logf("pool move, as the nodes' labels went:\n%s", log)
	g.Expect(log.sequence(moved)).To(Equal(fullUpgrade))
	g.Expect(log.sequence(f.nodes[0])).To(BeEmpty(), "the other node is not touched")
	count, breaches := deletions.results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(Equal(1))
}
