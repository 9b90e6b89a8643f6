//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// RepairThenUpgradeInput names the node whose repair waits for a reboot
// when the driver changes, the fleet's other nodes, and the versions to
// upgrade to (the first the policy does not pin already).
type RepairThenUpgradeInput struct {
	Sick     string
	Others   []string
	Versions []string
	// Skip names nodes labelled out of the upgrade: their drivers never
	// get ready.
	Skip []string
}

// RepairThenUpgradeSpec is finding 1 of issue 25 on the simulated
// cluster, with the chart's budgets: a node whose GPUs heal only on a
// reboot is repaired to reboot-required, then the driver's version
// changes. The upgrade takes the node over and replaces its driver; the
// reboot the repair asked for (as kured would) heals it; every node ends
// on the new driver, repaired, uncordoned and untainted.
func RepairThenUpgradeSpec(ctx context.Context, in RepairThenUpgradeInput) {
	all := append([]string{in.Sick}, in.Others...)
	for _, n := range in.Skip {
		setNodeLabel(ctx, n, gpuv1.LabelUpgradeSkip, gpuv1.LabelTrue)
	}
	setRemediation(ctx, func(*gpuv1.RemediationSpec) {})
	setSimAnnotation(ctx, in.Sick, fakenode.AnnotationUnhealthyUntil, fakenode.HealOnReboot)
	setSimAnnotation(ctx, in.Sick, fakenode.AnnotationUnhealthyGPUs, "2")
	expectLabel(ctx, in.Sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationRebootRequired), 3*time.Minute)

	var version string
	current := string(activePolicy(Default, ctx).Spec.Driver.Version)
	for _, v := range in.Versions {
		if v != current {
			version = v
			break
		}
	}
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.Version = gpuv1.DriverVersion(version) })
	// The upgrade does not wait for the repair, nor the repair for it.
	// upgrade-done alone is no proof: the node was upgrade-done before.
	Eventually(func(g Gomega) {
		got := node(g, ctx, in.Sick)
		g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverVersion, version))
		g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone)))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s upgraded to %s", in.Sick, version)
	Expect(getNode(ctx, in.Sick).Labels).To(HaveKeyWithValue(gpuv1.LabelRemediationState, string(gpuv1.RemediationRebootRequired)),
		"the new driver did not heal it: it still waits for its reboot")
	_, err := sh("hack/sim/reboot.sh", in.Sick)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		for _, n := range all {
			got := node(g, ctx, n)
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone)), "node %s", n)
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverVersion, version), "node %s", n)
			g.Expect(got.Spec.Unschedulable).To(BeFalse(), "node %s", n)
			g.Expect(slices.ContainsFunc(got.Spec.Taints, gating.IsOwnUnhealthyTaint)).To(BeFalse(), "node %s", n)
		}
		g.Expect(nodeLabel(g, ctx, in.Sick, gpuv1.LabelRemediationState)).To(Equal(string(gpuv1.RemediationDone)))
	}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), fmt.Sprintf("the fleet upgraded to %s", version))
	setRemediationOff(ctx)
	expectNoRemediationMarks(ctx)
}

// expectLabel waits until a node's label has value.
func expectLabel(ctx context.Context, name, key, value string, within time.Duration) {
	Eventually(func(g Gomega) {
		g.Expect(nodeLabel(g, ctx, name, key)).To(Equal(value))
	}).WithTimeout(within).WithPolling(time.Second).Should(Succeed(), "node %s, label %s", name, key)
}
