package driverpools

import (
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// errorOf is an NVIDIADriver's state and its Error condition's reason and
// message, as NVIDIA's users read them.
func errorOf(f *controllertest.Fixture, name string) func() string {
	return func() string {
		d := nvidiaDriver(f, name)()
		if c := apimeta.FindStatusCondition(d.Status.Conditions, gpuv1alpha1.ConditionError); c != nil && c.Status == "True" {
			return string(d.Status.State) + " " + c.Reason + ": " + c.Message
		}
		return string(d.Status.State)
	}
}

// setNVIDIADriver edits an NVIDIADriver as kubectl edit does.
func setNVIDIADriver(f *controllertest.Fixture, name string, mutate func(*gpuv1alpha1.NVIDIADriverSpec)) {
	NewWithT(f.T).Eventually(func() error {
		d := nvidiaDriver(f, name)()
		mutate(&d.Spec)
		return suite.Client.Update(f.Ctx, d)
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
}

// NVIDIA's default NVIDIADriver moved, doubled and cleared, as its users
// do: each step ends in the owner labels, status.state and an Error
// condition in NVIDIA's words, and a node whose owner is in question keeps
// its driver until it is settled; only a node that changes owner goes
// through the upgrade.
func TestDefaultNVIDIADriverMovedDoubledAndCleared(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true) })
	gold, other := f.Nodes[0], f.Nodes[1]
	f.SetLabel(gold, "tier", "gold")
	createNVIDIADriver(f, "default", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true })
	f.ExpectAllReady(f.Nodes...)
	for _, n := range f.Nodes {
		f.ExpectLabel(n, gpuv1.LabelDriverOwner, "default")
	}
	log := f.RecordUpgrades()

	// Two defaults: every node they would take is in question; it keeps
	// its owner and driver, and both say so.
	createNVIDIADriver(f, "fallback", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true; s.Version = "575.57.08" })
	for _, name := range []string{"default", "fallback"} {
		g.Eventually(errorOf(f, name), controllertest.Timeout, controllertest.Interval).Should(And(
			HavePrefix("notReady "+gpuv1alpha1.ReasonMultipleDefaults), ContainSubstring("multiple default NVIDIADrivers found")), name)
	}
	f.AfterMaintenancePasses()
	for _, n := range f.Nodes {
		g.Expect(f.Node(n).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverOwner, "default"), "node %s keeps its owner", n)
		g.Expect(log.Sequence(n)).To(BeEmpty(), "node %s", n)
	}

	// The default moved to fallback, default keeping the gold nodes: the
	// other node moves to fallback's driver through the upgrade.
	setNVIDIADriver(f, "default", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.Default = false
		s.NodeSelector = gpuv1.Labels{"tier": "gold"}
	})
	f.ExpectUpgraded(log, other)
	f.ExpectLabel(other, gpuv1.LabelDriverOwner, "fallback")
	f.ExpectLabel(other, gpuv1.LabelDriverVersion, "575.57.08")
	f.ExpectLabel(gold, gpuv1.LabelDriverOwner, "default")
	for _, name := range []string{"default", "fallback"} {
		g.Eventually(nvidiaDriver(f, name), controllertest.Timeout, controllertest.Interval).Should(WithTransform(readyNodes, Equal("ready 1/1")), name)
		g.Expect(errorOf(f, name)()).To(Equal("ready"), name)
	}
	g.Expect(log.Sequence(gold)).To(BeEmpty(), "the gold node stays with its owner")

	// fallback's default cleared, selecting every node: on the gold node
	// two NVIDIADrivers match, and it keeps its driver.
	setNVIDIADriver(f, "fallback", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = false })
	g.Eventually(errorOf(f, "fallback"), controllertest.Timeout, controllertest.Interval).Should(And(
		HavePrefix("notReady "+gpuv1alpha1.ReasonConflictingNodeSelector), ContainSubstring("multiple NVIDIADrivers match the same node "+gold)))
	f.AfterMaintenancePasses()
	g.Expect(f.Node(gold).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverOwner, "default"))
	g.Expect(f.Node(other).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverOwner, "fallback"))
	g.Expect(log.Sequence(gold)).To(BeEmpty())
}
