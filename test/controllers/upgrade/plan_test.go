package upgrade

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// kubectl gpu plan's judgement: with one node held in its upgrade's
// eviction, the other waits for maxParallelUpgrades, and its plan names
// the GPU pod whose PodDisruptionBudget would hold its eviction. The plan
// writes nothing: the waiting node stays as it was.
func TestPlanNamesTheQueueAndThePodsThatBlock(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](600)
	})
	f.ExpectAllReady(f.Nodes...)
	held := map[string]string{f.Nodes[0]: "training-a", f.Nodes[1]: "training-b"}
	for n, pod := range held {
		f.HeldGPUPod(pod, n)
	}
	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))

	var queued string
	g.Eventually(func() string {
		for _, n := range f.Nodes {
			if f.Node(n).Annotations[gpuv1.AnnotationMaintenanceWaiting] != "" {
				queued = n
			}
		}
		return queued
	}, controllertest.Timeout, controllertest.Interval).ShouldNot(BeEmpty(), "one node waits for the other's place")

	ctx, cancel := context.WithCancel(f.Ctx)
	defer cancel()
	pods, err := operandpods.ForNamespace(suite.Config(), controllertest.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = pods.Start(ctx) }()
	g.Eventually(func() error { _, err := pods.All(); return err }, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	r := &maintenance.Reconciler{Client: suite.Client, APIReader: suite.Client, Pods: pods, Graph: graph,
		Namespace: controllertest.Namespace, Timers: timers.Defaults()}
	before := f.Node(queued).ResourceVersion

	plan, err := r.Plan(ctx, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Starts).To(HaveLen(1), "the held node is not queued: it acts")
	s := plan.Starts[0]
	g.Expect(s.Node).To(Equal(queued))
	g.Expect(s.Operation).To(Equal("driver upgrade"))
	g.Expect(s.Next).To(BeFalse())
	g.Expect(s.Waiting).To(ContainSubstring("driver.upgradePolicy.maxParallelUpgrades"))
	g.Expect(s.Detailed).To(BeTrue())
	g.Expect(s.Blocked).To(ConsistOf("workloads/" + held[queued] + ": PodDisruptionBudget " + held[queued] + " allows no disruption now"))
	g.Expect(plan.Budgets).To(ContainElements("driver.upgradePolicy.maxParallelUpgrades=1", "driver.upgradePolicy.maxUnavailable=25%"))
	g.Expect(f.Node(queued).ResourceVersion).To(Equal(before), "a plan writes nothing")
}
