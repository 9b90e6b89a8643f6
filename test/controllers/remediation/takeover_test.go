package remediation

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// Finding 1 of issue 25: when the driver of a node whose repair waits for
// a reboot becomes outdated, the upgrade must not wait for the repair,
// nor the repair for the upgrade. The upgrade takes the node over (it
// replaces the driver anyway); the repair's parked node costs
// availability (maxUnavailable), not an upgrade's place, so the fleet's
// upgrade goes on past it; the reboot the repair asked for heals it
// afterwards. Every node ends upgraded, uncordoned, untainted.
func TestUpgradeTakesOverARepairWaitingForAReboot(t *testing.T) {
	g := NewWithT(t)
	f, sick, log := repairBeforeAnUpgrade(t, 3, fakenode.HealOnReboot)
	f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationRebootRequired), repairTimeout)

	upgrades := f.RecordUpgrades()
	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	for _, n := range f.Nodes {
		f.ExpectUpgradedWithin(upgrades, n, repairTimeout)
		g.Expect(f.Node(n).Spec.Unschedulable).To(BeFalse(), "node %s uncordoned", n)
	}
	g.Expect(f.Node(sick).Labels).To(HaveKeyWithValue(gpuv1.LabelRemediationState, string(gpuv1.RemediationRebootRequired)),
		"the new driver did not heal it: it still waits for its reboot")

	f.SetBootID(sick, "boot-2")
	g.Expect(suite.Sim.Restart(f.Ctx, sick)).To(Succeed())
	f.ExpectLabelWithin(sick, gpuv1.LabelRemediationState, string(gpuv1.RemediationDone), repairTimeout)
	g.Eventually(remediationMarks(f, sick), controllertest.Timeout, controllertest.Interval).ShouldNot(ContainElement("taint"))
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("as the nodes' labels went:\n%s", strings.Join(log.lines, "\n"))
}

// repairBeforeAnUpgrade starts nodes with remediation on (one repair at a
// time) and maxUnavailable 100%, and makes the first node's GPUs unhealthy
// until heal. It returns the fixture, the sick node and the log of the
// nodes' repair and upgrade states.
func repairBeforeAnUpgrade(t *testing.T, nodes int, heal string) (*controllertest.Fixture, string, *busyLog) {
	f := suite.Setup(t, nodes, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Operator.Remediation = gpuv1.RemediationSpec{Enabled: true, MaxParallel: ptr.To(intstr.FromInt32(1))}
		cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	})
	f.ExpectAllReady(f.Nodes...)
	sick := f.Nodes[0]
	log := recordBusy(f)
	f.Annotate(sick, fakenode.AnnotationUnhealthyUntil, heal)
	f.Annotate(sick, fakenode.AnnotationUnhealthyGPUs, "2")
	return f, sick, log
}
