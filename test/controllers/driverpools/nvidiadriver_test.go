package driverpools

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// createNVIDIADriver creates an NVIDIADriver, deleted when the test ends
// (before its ClusterPolicy).
func createNVIDIADriver(f *controllertest.Fixture, name string, mutate func(*gpuv1alpha1.NVIDIADriverSpec)) {
	nvd := &gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gpuv1alpha1.NVIDIADriverSpec{DriverType: "gpu", Repository: "nvcr.io/nvidia", Image: "driver", Version: "595.91.07"}}
	mutate(&nvd.Spec)
	NewWithT(f.T).Expect(suite.Client.Create(f.Ctx, nvd)).To(Succeed())
	f.T.Cleanup(func() { _ = suite.Client.Delete(f.Ctx, nvd) })
}

func nvidiaDriver(f *controllertest.Fixture, name string) func() *gpuv1alpha1.NVIDIADriver {
	return func() *gpuv1alpha1.NVIDIADriver {
		nvd := &gpuv1alpha1.NVIDIADriver{}
		NewWithT(f.T).Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Name: name}, nvd)).To(Succeed())
		return nvd
	}
}

func readyNodes(nvd *gpuv1alpha1.NVIDIADriver) string {
	return string(nvd.Status.State) + " " + nvd.Status.ReadyNodes
}

// Handing a ClusterPolicy's pools to NVIDIADrivers named after them, with
// the same settings, replaces no driver: the DaemonSets keep their names
// and templates, and no node enters the upgrade. NVIDIA's own migration
// orphans every driver pod and upgrades every node. Here the policy hands
// the driver over before the default NVIDIADriver exists, as helm does
// (it applies the ClusterPolicy first): the default pool's DaemonSet is
// pruned, its pods orphaned and held, and the DaemonSet applied again
// adopts them.
func TestMigrationToNVIDIADriversReplacesNoDriver(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 3, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
			{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}, Version: "550.54.15"},
		}
	})
	f.SetLabel(f.Nodes[0], "gpu", "a100")
	f.ExpectAllReady(f.Nodes...)
	f.ExpectLabel(f.Nodes[0], gpuv1.LabelDriverPool, "a100")
	before := f.DriverOwners()
	deletions := f.RecordDriverDeletions()
	log := f.RecordUpgrades()

	createNVIDIADriver(f, "a100", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.NodeSelector = gpuv1.Labels{"gpu": "a100"}
		s.Version = "550.54.15"
	})
	g.Eventually(nvidiaDriver(f, "a100"), controllertest.Timeout, controllertest.Interval).
		Should(WithTransform(readyNodes, Equal("disabled ")), "not acted on before useNvidiaDriverCRD")
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true) })
	// No NVIDIADriver selects the other two nodes: their DaemonSet goes,
	// their drivers stay, orphaned.
	g.Eventually(func() map[string]string { return f.DriverOwners() }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(map[string]string{f.Nodes[0]: before[f.Nodes[0]], f.Nodes[1]: "none", f.Nodes[2]: "none"}))
	f.AfterMaintenancePasses()
	g.Expect(f.DriverOwners()).To(HaveLen(3), "held, not replaced")
	// NVIDIA's default image path, written whole: the same image. The
	// DaemonSet applied again takes a while to adopt the orphans, as the
	// garbage collector and the DaemonSet controller do: the nodes wait
	// for it rather than upgrade.
	suite.Sim.HoldAdoption(true)
	t.Cleanup(func() { suite.Sim.HoldAdoption(false) })
	createNVIDIADriver(f, "default", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.Default, s.Repository, s.Image = true, "", "nvcr.io/nvidia/driver"
	})
	g.Eventually(func() bool { return len(f.DaemonSets("driver")) == 2 }, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	f.AfterMaintenancePasses()
	for _, n := range f.Nodes {
		g.Expect(f.Node(n).Labels[gpuv1.LabelUpgradeState]).To(BeElementOf("", string(gpuv1.UpgradeDone)),
			"orphans of the DaemonSet that will adopt them are not outdated")
	}
	suite.Sim.HoldAdoption(false)

	g.Eventually(nvidiaDriver(f, "a100"), controllertest.Timeout, controllertest.Interval).Should(WithTransform(readyNodes, Equal("ready 1/1")))
	g.Eventually(nvidiaDriver(f, "default"), controllertest.Timeout, controllertest.Interval).Should(WithTransform(readyNodes, Equal("ready 2/2")))
	f.ExpectAllReady(f.Nodes...)
	g.Eventually(func() map[string]string { return f.DriverOwners() }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(before), "adopted by the DaemonSet of the same name")
	count, breaches := deletions.Results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(BeZero(), "no driver replaced")
	for _, n := range f.Nodes {
		g.Expect(log.Sequence(n)).To(BeEmpty(), "node %s entered the upgrade", n)
	}
}

// Two NVIDIADrivers that select a node leave its driver as it is, and both
// say so; once one lets go, the node moves to the other through the
// upgrade.
func TestConflictHoldsTheDriverUntilSettled(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true) })
	createNVIDIADriver(f, "gold", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.NodeSelector = gpuv1.Labels{"tier": "gold"}
		s.Version = "550.54.15"
	})
	createNVIDIADriver(f, "rest", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true })
	f.ExpectAllReady(f.Nodes...)
	moving := f.Nodes[1]
	f.ExpectLabel(moving, gpuv1.LabelDriverPool, "rest")
	deletions := f.RecordDriverDeletions()
	log := f.RecordUpgrades()

	// A third NVIDIADriver selecting every node with a zone conflicts
	// with both on the node that gets one.
	createNVIDIADriver(f, "zonal", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.NodeSelector = gpuv1.Labels{"zone": "a"} })
	// Both at once: one alone would move the node to gold or zonal.
	f.SetLabels(moving, map[string]string{"tier": "gold", "zone": "a"})
	g.Eventually(nvidiaDriver(f, "gold"), controllertest.Timeout, controllertest.Interval).Should(WithTransform(
		func(d *gpuv1alpha1.NVIDIADriver) []gpuv1alpha1.NodeConflict { return d.Status.Conflicts },
		Equal([]gpuv1alpha1.NodeConflict{{Node: moving, With: []string{"zonal"}}})))
	// Each NVIDIADriver's status is written on its own: zonal's may come
	// after gold's.
	g.Eventually(func() string {
		d := nvidiaDriver(f, "zonal")()
		if c := apimeta.FindStatusCondition(d.Status.Conditions, gpuv1alpha1.ConditionError); c != nil {
			return string(d.Status.State) + " " + c.Reason
		}
		return string(d.Status.State)
	}, controllertest.Timeout, controllertest.Interval).Should(Equal("notReady " + gpuv1alpha1.ReasonConflictingNodeSelector))
	zonal := nvidiaDriver(f, "zonal")()
	f.AfterMaintenancePasses()
	g.Expect(f.Node(moving).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "rest"))
	g.Expect(f.Node(moving).Labels[gpuv1.LabelUpgradeState]).To(BeElementOf("", string(gpuv1.UpgradeDone)), "a held node does not upgrade")

	// The zone's NVIDIADriver goes: gold alone selects the node, which
	// moves to it through the upgrade.
	g.Expect(suite.Client.Delete(f.Ctx, zonal)).To(Succeed())
	f.ExpectUpgraded(log, moving)
	f.ExpectLabel(moving, gpuv1.LabelDriverPool, "gold")
	f.ExpectLabel(moving, gpuv1.LabelDriverVersion, "550.54.15")
	f.ExpectAllReady(f.Nodes...)
	g.Eventually(nvidiaDriver(f, "gold"), controllertest.Timeout, controllertest.Interval).Should(WithTransform(readyNodes, Equal("ready 1/1")))
	g.Expect(nvidiaDriver(f, "gold")().Status.Conflicts).To(BeEmpty())
	g.Eventually(func() []gpuv1.UpgradeState { return log.Sequence(moving) }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(controllertest.FullUpgrade))
	g.Expect(log.Sequence(f.Nodes[0])).To(BeEmpty())
	count, breaches := deletions.Results()
	g.Expect(breaches).To(BeEmpty())
	g.Expect(count).To(Equal(1))
}

// Kernel module parameters are part of the driver: setting them, and
// changing their content, upgrades every node of the pool within its
// budget; a ConfigMap that does not exist changes nothing and says why.
func TestKernelModuleConfigRollsThroughTheUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	f.ExpectAllReady(f.Nodes...)
	deletions := f.RecordDriverDeletions()

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.KernelModuleConfig = &gpuv1.DriverKernelModuleConfig{Name: "gb200-params"}
	})
	g.Eventually(func() string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Name: f.Policy.Name}, cp)).To(Succeed())
		if c := apimeta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded); c != nil {
			return c.Message
		}
		return ""
	}, controllertest.Timeout, controllertest.Interval).Should(ContainSubstring("kernelModuleConfig names ConfigMap gb200-params, which does not exist"))
	count, _ := deletions.Results()
	g.Expect(count).To(BeZero(), "nothing is replaced for a ConfigMap that is not there")

	log := f.RecordUpgrades()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gb200-params", Namespace: controllertest.Namespace},
		Data: map[string]string{"nvidia.conf": "NVreg_CoherentGPUMemoryMode=driver\n"}}
	g.Expect(suite.Client.Create(f.Ctx, cm)).To(Succeed())
	t.Cleanup(func() { _ = suite.Client.Delete(f.Ctx, cm) })
	for _, n := range f.Nodes {
		f.ExpectUpgraded(log, n)
	}
	f.ExpectAllReady(f.Nodes...)
	p := f.PodOn(f.Nodes[0], "driver")
	g.Expect(p.Spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "kernel-module-config",
		MountPath: "/drivers/nvidia.conf", SubPath: "nvidia.conf", ReadOnly: true}))
	g.Expect(log.Peak()).To(Equal(1), "maxParallelUpgrades is 1")

	// New content: a new driver again.
	first := p.UID
	cm.Data["nvidia.conf"] = "NVreg_CoherentGPUMemoryMode=disabled\n"
	g.Expect(suite.Client.Update(f.Ctx, cm)).To(Succeed())
	g.Eventually(func() bool { q := f.PodOn(f.Nodes[0], "driver"); return q != nil && q.UID != first },
		controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	f.ExpectAllReady(f.Nodes...)
	_, breaches := deletions.Results()
	g.Expect(breaches).To(BeEmpty())
}
