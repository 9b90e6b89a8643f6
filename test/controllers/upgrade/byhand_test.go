package upgrade

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// manualUpgrades turns autoUpgrade off, with driver.manager's env: NVIDIA's
// manual upgrade, where a person deletes a node's outdated driver pod.
func manualUpgrades(env ...gpuv1.EnvVar) func(*gpuv1.ClusterPolicy) {
	return func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.AutoUpgrade = ptr.To(false)
		cp.Spec.Driver.Manager = &gpuv1.DriverManagerSpec{Env: env}
	}
}

// deleteDriverPod deletes the node's driver pod as a person does:
// kubectl delete pod -n gpu-operator <driver pod on the node>.
func deleteDriverPod(f *controllertest.Fixture, node string) {
	f.T.Helper()
	pod := f.PodOn(node, "driver")
	if pod == nil {
		f.T.Fatalf("no driver pod on %s", node)
	}
	if err := suite.Client.Delete(f.Ctx, pod); err != nil {
		f.T.Fatal(err)
	}
}

// gone reports whether a pod was deleted or evicted.
func gone(f *controllertest.Fixture, pod *corev1.Pod) func() bool {
	return func() bool {
		live := &corev1.Pod{}
		err := suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(pod), live)
		return apierrors.IsNotFound(err) || (err == nil && live.DeletionTimestamp != nil)
	}
}

// With autoUpgrade off, a node waits in upgrade-required and nothing is
// evicted. A person deleting its outdated driver pod (NVIDIA's manual
// upgrade) gets what NVIDIA's driver manager does for the new pod, by
// driver.manager's env (NVIDIA's defaults: ENABLE_GPU_POD_EVICTION true):
// the node is cordoned, its GPU pods evicted, the new driver validated and
// the node uncordoned, within the budget. The other node is not touched.
func TestDriverPodReplacedByHandEvictsItsGPUPods(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, manualUpgrades())
	f.ExpectAllReady(f.Nodes...)
	f.EnsureNamespace("workloads")
	byHand, waiting := f.Nodes[0], f.Nodes[1]
	evicted := f.GPUPod("training", byHand, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": controllertest.ResourceOne}
	})
	kept := f.GPUPod("inference", waiting, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": controllertest.ResourceOne}
	})
	log := f.RecordUpgrades()

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	for _, n := range f.Nodes {
		f.ExpectLabel(n, gpuv1.LabelUpgradeState, "upgrade-required")
	}
	f.AfterMaintenancePasses()
	g.Expect(gone(f, evicted)()).To(BeFalse(), "autoUpgrade off: nothing is evicted until a person acts")

	deleteDriverPod(f, byHand)
	f.ExpectLabel(byHand, gpuv1.LabelUpgradeState, "upgrade-done")
	f.ExpectLabel(byHand, gpuv1.LabelDriverVersion, "575.57.08")
	g.Expect(gone(f, evicted)()).To(BeTrue(), "the GPU pod left before the new driver loaded")
	g.Expect(f.Node(byHand).Spec.Unschedulable).To(BeFalse(), "uncordoned once the new driver works")
	g.Expect(f.Node(byHand).Annotations).NotTo(HaveKey("nvidia.com/gpu-driver-upgrade.by-hand"), "the mark goes with the upgrade")
	g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(byHand) }, controllertest.Timeout, controllertest.Interval).Should(Equal([]gpuv1.UpgradeState{
		gpuv1.UpgradeRequired, gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs, gpuv1.UpgradePodDeletion,
		gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation, gpuv1.UpgradeUncordon, gpuv1.UpgradeDone,
	}))
	g.Eventually(func() []string { return f.EventsOf(byHand) }, controllertest.Timeout, controllertest.Interval).
		Should(ContainElement(ContainSubstring("the driver pod was replaced outside the upgrade: the GPU pods leave before its new driver loads")))

	f.AfterMaintenancePasses()
	f.ExpectLabel(waiting, gpuv1.LabelUpgradeState, "upgrade-required")
	g.Expect(gone(f, kept)()).To(BeFalse(), "the other node waits for its person")
	g.Expect(f.Node(waiting).Spec.Unschedulable).To(BeFalse())
}

// driver.manager set to evict nothing (ENABLE_GPU_POD_EVICTION false,
// ENABLE_AUTO_DRAIN false): NVIDIA's manager then leaves the node as it
// is, and the new driver loads once the GPU pods end. So does the
// operator: no cordon, no eviction, the node upgrade-done, saying why.
func TestDriverManagerSetToEvictNothingLeavesTheNode(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, manualUpgrades(gpuv1.EnvVar{Name: gpuv1.ManagerEnvGPUPodEviction, Value: "false"}))
	f.ExpectAllReady(f.Nodes...)
	f.EnsureNamespace("workloads")
	node := f.Nodes[0]
	pod := f.GPUPod("training", node, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": controllertest.ResourceOne}
	})
	log := f.RecordUpgrades()

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(node, gpuv1.LabelUpgradeState, "upgrade-required")
	deleteDriverPod(f, node)
	f.ExpectLabel(node, gpuv1.LabelUpgradeState, "upgrade-done")
	g.Expect(gone(f, pod)()).To(BeFalse())
	g.Expect(log.Sequence(node)).To(Equal([]gpuv1.UpgradeState{gpuv1.UpgradeRequired, gpuv1.UpgradeDone}), "never cordoned")
	g.Eventually(func() []string { return f.EventsOf(node) }, controllertest.Timeout, controllertest.Interval).
		Should(ContainElement(ContainSubstring("ENABLE_GPU_POD_EVICTION and ENABLE_AUTO_DRAIN are false")))
}
