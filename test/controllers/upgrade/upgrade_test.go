package upgrade

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// Changing driver.version moves every node through the steps in order,
// never more at once than the budget allows (maxParallelUpgrades 1), and
// ends with every node on the new driver, schedulable. Before it, every
// node is upgrade-done, its driver pod current.
func TestDriverUpgradeRollsWithinBudget(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 3)
	f.ExpectAllReady(f.Nodes...)
	for _, n := range f.Nodes {
		f.ExpectLabel(n, gpuv1.LabelDriverVersion, "595.91.07")
		// As NVIDIA's upgrade controller marks a node whose driver pod
		// is in sync: runbooks count these.
		f.ExpectLabel(n, gpuv1.LabelUpgradeState, "upgrade-done")
	}
	log := f.RecordUpgrades()

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	for _, n := range f.Nodes {
		f.ExpectUpgraded(log, n)
		f.ExpectLabel(n, gpuv1.LabelDriverVersion, "575.57.08")
	}
	f.ExpectAllReady(f.Nodes...)
	t.Logf("upgrade of %d nodes, as the nodes' labels went:\n%s", len(f.Nodes), log)
	g.Expect(log.Peak()).To(Equal(1), "maxParallelUpgrades is 1")
	for _, n := range f.Nodes {
		g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(n) }, controllertest.Timeout, controllertest.Interval).
			Should(Equal(controllertest.FullUpgrade), "node %s (the log's watch catches up with the reads)", n)
		g.Expect(f.Node(n).Spec.Unschedulable).To(BeFalse())
	}
}

// A GPU pod protected by a PodDisruptionBudget cannot be evicted: the node
// waits until the deletion timeout, then fails (drain is off), stays
// cordoned for a person to look at, and keeps its place in
// maxParallelUpgrades, as NVIDIA's upgrade counts a failed node in
// progress (k8s-operator-libs, pkg/upgrade/upgrade_state.go,
// GetUpgradesInProgress): the next node waits, saying why. Set back to
// upgrade-required, the failed node is retried, and the next one goes.
func TestGPUPodWithPDBFailsTheNodeAtTheTimeout(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](3)
		cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})
	f.ExpectAllReady(f.Nodes...)
	stuck, other := f.Nodes[0], f.Nodes[1]
	pdb := f.HeldGPUPod("training", stuck)

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(stuck, gpuv1.LabelUpgradeState, "upgrade-failed")
	g.Expect(f.Node(stuck).Spec.Unschedulable).To(BeTrue(), "a failed node stays cordoned")
	// Events are written in the background, after the state.
	g.Eventually(func() []string { return f.EventsOf(stuck) }, controllertest.Timeout, controllertest.Interval).
		Should(ContainElement(ContainSubstring("1 GPU pods left after 3s and drain is disabled")))
	g.Eventually(func() map[string]string { return f.Node(other).Annotations }, controllertest.Timeout, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.AnnotationMaintenanceWaiting, ContainSubstring("driver.upgradePolicy.maxParallelUpgrades")))
	g.Expect(f.Node(other).Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, "upgrade-required"), "the failed node holds the place")

	g.Expect(suite.Client.Delete(f.Ctx, pdb)).To(Succeed())
	f.SetLabel(stuck, gpuv1.LabelUpgradeState, "upgrade-required")
	f.ExpectLabel(stuck, gpuv1.LabelUpgradeState, "upgrade-done")
	f.ExpectLabel(other, gpuv1.LabelUpgradeState, "upgrade-done")
	g.Expect(f.Node(stuck).Spec.Unschedulable).To(BeFalse())
	g.Eventually(func() map[string]string { return f.Node(other).Annotations }, controllertest.Timeout, controllertest.Interval).
		ShouldNot(HaveKey(gpuv1.AnnotationMaintenanceWaiting), "nothing waits any more")
}

// A pod that uses the GPU only through the NVIDIA runtime class, or
// through CDI devices named for the toolkit's NRI plugin, asking for no
// GPU, is evicted too: otherwise it would hold the old driver.
func TestRuntimeClassPodIsEvicted(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	f.EnsureNamespace("workloads")
	byClass := f.GPUPod("inference", f.Nodes[0], func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("nvidia") })
	byNRI := f.GPUPod("batch", f.Nodes[0], func(p *corev1.Pod) {
		p.Annotations = map[string]string{"nvidia.cdi.k8s.io/container.main": "k8s.device-plugin.nvidia.com/gpu=all"}
	})

	log := f.RecordUpgrades()
	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectUpgraded(log, f.Nodes[0])
	for _, pod := range []*corev1.Pod{byClass, byNRI} {
		err := suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s was evicted", pod.Name)
	}
}

// A node cordoned by someone before the upgrade stays cordoned after it.
func TestCordonedNodeStaysCordoned(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	g.Eventually(func() error {
		n := f.Node(f.Nodes[0])
		n.Spec.Unschedulable = true
		return suite.Client.Update(f.Ctx, n)
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())

	log := f.RecordUpgrades()
	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectUpgraded(log, f.Nodes[0])
	g.Expect(f.Node(f.Nodes[0]).Spec.Unschedulable).To(BeTrue())
}

// Stopping and starting the operator in the middle of an upgrade resumes
// it from the nodes' labels: no step is repeated or skipped.
func TestUpgradeResumesAfterOperatorRestart(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.WaitForCompletion.PodSelector = "app=job"
	})
	f.ExpectAllReady(f.Nodes...)
	f.EnsureNamespace("workloads")
	job := f.GPUPod("job", f.Nodes[0], func(*corev1.Pod) {})
	log := f.RecordUpgrades()

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(f.Nodes[0], gpuv1.LabelUpgradeState, "wait-for-jobs-required")
	suite.StopOperator()
	g.Expect(suite.Client.Delete(f.Ctx, job, client.GracePeriodSeconds(0))).To(Succeed())
	g.Expect(suite.StartOperator()).To(Succeed())

	for _, n := range f.Nodes {
		f.ExpectUpgraded(log, n)
	}
	t.Logf("upgrade across an operator restart:\n%s", log)
	for _, n := range f.Nodes {
		g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(n) }, controllertest.Timeout, controllertest.Interval).
			Should(Equal(controllertest.FullUpgrade), "node %s (the log's watch catches up with the reads)", n)
	}
}

// Changing only labels or annotations of the DaemonSets restarts no driver.
func TestLabelOnlyChangeUpgradesNothing(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	f.ExpectAllReady(f.Nodes...)
	log := f.RecordUpgrades()
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "gpu"}
		cp.Spec.Daemonsets.Annotations = gpuv1.Annotations{"example.com/owner": "infra"}
	})
	g.Eventually(func() string {
		return f.DaemonSets("driver")[0].Spec.Template.Labels["team"]
	}, controllertest.Timeout, controllertest.Interval).Should(Equal("gpu"))
	// The upgrade controller looks at the fleet on a DaemonSet change;
	// every upgrade state any node took is in the watch's history.
	time.Sleep(3 * time.Second)
	for _, n := range f.Nodes {
		g.Expect(log.Sequence(n)).To(BeEmpty(), "node %s", n)
	}
}

// Nodes of a pool run the pool's pinned driver; others the default; a
// mixed-OS cluster gets one DaemonSet per OS with the matching tag.
func TestDriverPoolsAndOperatingSystems(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
			{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}, Version: "550.54.15"},
		}
	})
	rhel := f.Nodes[0] + "-rhel"
	f.CreateNode(rhel, map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID": "rhel", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "9.4",
	})
	f.Nodes = append(f.Nodes, rhel)
	f.SetLabel(f.Nodes[1], "gpu", "a100")
	f.ExpectAllReady(f.Nodes...)

	f.ExpectLabel(f.Nodes[0], gpuv1.LabelDriverPool, "default")
	f.ExpectLabel(f.Nodes[1], gpuv1.LabelDriverPool, "a100")
	f.ExpectLabel(f.Nodes[0], gpuv1.LabelDriverVersion, "595.91.07")
	f.ExpectLabel(f.Nodes[1], gpuv1.LabelDriverVersion, "550.54.15")
	images := map[string]string{}
	for _, ds := range f.DaemonSets("driver") {
		images[ds.Name] = ds.Spec.Template.Spec.Containers[0].Image
	}
	g.Expect(images).To(Equal(map[string]string{
		"nvidia-driver-daemonset-ubuntu22.04":      "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04",
		"nvidia-driver-daemonset-rhel9.4":          "nvcr.io/nvidia/driver:595.91.07-rhel9.4",
		"nvidia-driver-daemonset-a100-ubuntu22.04": "nvcr.io/nvidia/driver:550.54.15-ubuntu22.04",
	}))
}

// Finding 7 of issue 25: a person who uncordons a node in the middle of
// its upgrade, then cordons it again, keeps it cordoned after the upgrade.
// The upgrade's cordon has a field owner of its own, written once when it
// cordons and dropped at the end: the upgrade does not cordon the node
// again at its next step, so kubectl cordon finds it schedulable and
// writes, and the person's write owns the field. (Re-cordoned at every
// step, the node looked cordoned to kubectl, which then writes nothing,
// and the upgrade's uncordon took the person's cordon away.)
func TestAPersonsCordonOutlivesTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.WaitForCompletion.PodSelector = "app=job"
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](600)
	})
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	f.EnsureNamespace("workloads")
	job := f.GPUPod("job", node, func(*corev1.Pod) {})
	pdb := f.HeldGPUPod("training", node)
	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(node, gpuv1.LabelUpgradeState, string(gpuv1.UpgradeWaitForJobs))
	g.Expect(f.Node(node).Spec.Unschedulable).To(BeTrue(), "the upgrade cordoned it")

	// kubectl uncordon; the job ends and the upgrade steps on; then
	// kubectl cordon, which writes only where the node is schedulable.
	kubectlCordon(f, node, false)
	g.Expect(suite.Client.Delete(f.Ctx, job, client.GracePeriodSeconds(0))).To(Succeed())
	f.ExpectLabel(node, gpuv1.LabelUpgradeState, string(gpuv1.UpgradePodDeletion))
	kubectlCordon(f, node, true)
	g.Expect(suite.Client.Delete(f.Ctx, pdb)).To(Succeed())
	f.ExpectLabel(node, gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone))
	g.Expect(f.Node(node).Spec.Unschedulable).To(BeTrue(), "the person's cordon stays")
}

// kubectlCordon does what kubectl cordon (or uncordon) does: nothing when
// the node is as asked already, else a write of spec.unschedulable.
func kubectlCordon(f *controllertest.Fixture, node string, cordon bool) {
	NewWithT(f.T).Eventually(func() error {
		n := f.Node(node)
		if n.Spec.Unschedulable == cordon {
			return nil
		}
		n.Spec.Unschedulable = cordon
		return suite.Client.Update(f.Ctx, n)
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
}
