package upgrade

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// Switching driver.version from a tag to a digest renames every driver
// DaemonSet (one per OS becomes one for all). The pruned DaemonSets used to
// take every driver pod with them at once; now each node is upgraded in
// turn, within the budget (issue 12, finding 1).
func TestDigestSwitchReplacesDriversThroughTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 3)
	f.ExpectAllReady(f.Nodes...)
	deletions := f.RecordDriverDeletions()
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
	g.Eventually(func() map[string]string { return f.DriverOwners() }, controllertest.Timeout, controllertest.Interval).Should(HaveLen(len(f.Nodes)))
	g.Expect(f.DriverOwners()).To(HaveEach(Equal("nvidia-driver-daemonset")))
	count, breaches := deletions.Results()
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
	deletions := f.RecordDriverDeletions()
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
	count, breaches := deletions.Results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(Equal(1))
}
