package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

var resourceOne = resource.MustParse("1")

// The steps of an upgrade in which no GPU pod or job is in the way.
var fullUpgrade = []gpuv1.UpgradeState{
	gpuv1.UpgradeRequired, gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs, gpuv1.UpgradePodDeletion,
	gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation, gpuv1.UpgradeUncordon, gpuv1.UpgradeDone,
}

func newVersion(v gpuv1.DriverVersion) func(*gpuv1.ClusterPolicy) {
	return func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.Version = v }
}

func ensureNamespace(f *fixture, name string) {
	err := k8sClient.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
}

// Changing driver.version moves every node through the steps in order,
// never more at once than the budget allows (maxParallelUpgrades 1), and
// ends with every node on the new driver, schedulable.
func TestDriverUpgradeRollsWithinBudget(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 3)
	f.expectAllReady(f.nodes...)
	for _, n := range f.nodes {
		f.expectLabel(n, gpuv1.LabelDriverVersion, "570.172.08")
	}
	log := f.recordUpgrades()

	f.updatePolicy(newVersion("575.57.08"))
	for _, n := range f.nodes {
		f.expectLabel(n, gpuv1.LabelUpgradeState, "upgrade-done")
		f.expectLabel(n, gpuv1.LabelDriverVersion, "575.57.08")
	}
	f.expectAllReady(f.nodes...)
	t.Logf("upgrade of %d nodes, as the nodes' labels went:\n%s", len(f.nodes), log)
	g.Expect(log.peak()).To(Equal(1), "maxParallelUpgrades is 1")
	for _, n := range f.nodes {
		g.Expect(log.sequence(n)).To(Equal(fullUpgrade), "node %s", n)
		g.Expect(f.node(n).Spec.Unschedulable).To(BeFalse())
	}
}

// A GPU pod protected by a PodDisruptionBudget cannot be evicted: the node
// waits until the deletion timeout, then fails (drain is off), stays
// cordoned for a person to look at, and holds no other node back beyond the
// budget. Set back to upgrade-required, it is retried.
func TestGPUPodWithPDBFailsTheNodeAtTheTimeout(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](3)
		cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})
	f.expectAllReady(f.nodes...)
	stuck, other := f.nodes[0], f.nodes[1]
	pdb := f.heldGPUPod("training", stuck)

	f.updatePolicy(newVersion("575.57.08"))
	f.expectLabel(stuck, gpuv1.LabelUpgradeState, "upgrade-failed")
	f.expectLabel(other, gpuv1.LabelUpgradeState, "upgrade-done")
	g.Expect(f.node(stuck).Spec.Unschedulable).To(BeTrue(), "a failed node stays cordoned")
	g.Expect(f.eventsOf(stuck)).To(ContainElement(ContainSubstring("1 GPU pods left after 3s and drain is disabled")))

	g.Expect(k8sClient.Delete(f.ctx, pdb)).To(Succeed())
	f.setLabel(stuck, gpuv1.LabelUpgradeState, "upgrade-required")
	f.expectLabel(stuck, gpuv1.LabelUpgradeState, "upgrade-done")
	g.Expect(f.node(stuck).Spec.Unschedulable).To(BeFalse())
}

// A pod that uses the GPU only through the NVIDIA runtime class, asking
// for no GPU, is evicted too: otherwise it would hold the old driver.
func TestRuntimeClassPodIsEvicted(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	f.expectAllReady(f.nodes...)
	ensureNamespace(f, "workloads")
	pod := f.gpuPod("inference", f.nodes[0], func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("nvidia") })

	f.updatePolicy(newVersion("575.57.08"))
	f.expectLabel(f.nodes[0], gpuv1.LabelUpgradeState, "upgrade-done")
	err := k8sClient.Get(f.ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the runtime-class pod was evicted")
}

// A node cordoned by someone before the upgrade stays cordoned after it.
func TestCordonedNodeStaysCordoned(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	f.expectAllReady(f.nodes...)
	g.Eventually(func() error {
		n := f.node(f.nodes[0])
		n.Spec.Unschedulable = true
		return k8sClient.Update(f.ctx, n)
	}, timeout, interval).Should(Succeed())

	f.updatePolicy(newVersion("575.57.08"))
	f.expectLabel(f.nodes[0], gpuv1.LabelUpgradeState, "upgrade-done")
	g.Expect(f.node(f.nodes[0]).Spec.Unschedulable).To(BeTrue())
}

// Stopping and starting the operator in the middle of an upgrade resumes
// it from the nodes' labels: no step is repeated or skipped.
func TestUpgradeResumesAfterOperatorRestart(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.WaitForCompletion.PodSelector = "app=job"
	})
	f.expectAllReady(f.nodes...)
	ensureNamespace(f, "workloads")
	job := f.gpuPod("job", f.nodes[0], func(*corev1.Pod) {})
	log := f.recordUpgrades()

	f.updatePolicy(newVersion("575.57.08"))
	f.expectLabel(f.nodes[0], gpuv1.LabelUpgradeState, "wait-for-jobs-required")
	stopOperator()
	g.Expect(k8sClient.Delete(f.ctx, job, client.GracePeriodSeconds(0))).To(Succeed())
	g.Expect(startOperator()).To(Succeed())

	for _, n := range f.nodes {
		f.expectLabel(n, gpuv1.LabelUpgradeState, "upgrade-done")
	}
	t.Logf("upgrade across an operator restart:\n%s", log)
	for _, n := range f.nodes {
		g.Expect(log.sequence(n)).To(Equal(fullUpgrade), "node %s", n)
	}
}

// Changing only labels or annotations of the DaemonSets restarts no driver.
func TestLabelOnlyChangeUpgradesNothing(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2)
	f.expectAllReady(f.nodes...)
	log := f.recordUpgrades()
	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "gpu"}
		cp.Spec.Daemonsets.Annotations = gpuv1.Annotations{"example.com/owner": "infra"}
	})
	g.Eventually(func() string {
		return f.daemonSets("driver")[0].Spec.Template.Labels["team"]
	}, timeout, interval).Should(Equal("gpu"))
	// The upgrade controller looks at the fleet on a DaemonSet change;
	// every upgrade state any node took is in the watch's history.
	time.Sleep(3 * time.Second)
	for _, n := range f.nodes {
		g.Expect(log.sequence(n)).To(BeEmpty(), "node %s", n)
	}
}

// Nodes of a pool run the pool's pinned driver; others the default; a
// mixed-OS cluster gets one DaemonSet per OS with the matching tag.
func TestDriverPoolsAndOperatingSystems(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
			{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}, Version: "550.54.15"},
		}
	})
	rhel := f.nodes[0] + "-rhel"
	f.createNode(rhel, map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID": "rhel", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "9.4",
	})
	f.nodes = append(f.nodes, rhel)
	f.setLabel(f.nodes[1], "gpu", "a100")
	f.expectAllReady(f.nodes...)

	f.expectLabel(f.nodes[0], gpuv1.LabelDriverPool, "default")
	f.expectLabel(f.nodes[1], gpuv1.LabelDriverPool, "a100")
	f.expectLabel(f.nodes[0], gpuv1.LabelDriverVersion, "570.172.08")
	f.expectLabel(f.nodes[1], gpuv1.LabelDriverVersion, "550.54.15")
	images := map[string]string{}
	for _, ds := range f.daemonSets("driver") {
		images[ds.Name] = ds.Spec.Template.Spec.Containers[0].Image
	}
	g.Expect(images).To(Equal(map[string]string{
		"nvidia-driver-daemonset-ubuntu22.04":      "nvcr.io/nvidia/driver:570.172.08-ubuntu22.04",
		"nvidia-driver-daemonset-rhel9.4":          "nvcr.io/nvidia/driver:570.172.08-rhel9.4",
		"nvidia-driver-daemonset-a100-ubuntu22.04": "nvcr.io/nvidia/driver:550.54.15-ubuntu22.04",
	}))
}
