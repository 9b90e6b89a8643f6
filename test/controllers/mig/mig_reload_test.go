package mig

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// The steps that create a node's MIG devices again, once a reboot or a
// new driver destroyed them: no eviction.
var migRestore = []gpuv1.MIGReconfigureState{gpuv1.MIGReconfigureDone, gpuv1.MIGReconfigureRequired,
	gpuv1.MIGClientsOff, gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone}

// MIG devices do not survive a driver reload or a reboot (MIG mode does):
// after a driver upgrade, and after a reboot, the node's configuration is
// applied again before its device plugin starts, evicting no GPU pod, and
// the upgrade, whose validation waits for the device plugin, completes. The simulated node
// loses its devices as a real one does: its device plugin would not
// start under the single strategy.
func TestMIGDevicesComeBackAfterADriverReload(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGPool, func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) })
	node := "mig-reload-0"
	f.CreateNode(node, map[string]string{"gpu-type": "h200"})
	f.Nodes = append(f.Nodes, node)
	t.Cleanup(func() {
		if t.Failed() {
			n := f.Node(node)
			t.Logf("node at the failure: labels %v\nannotations %v\nallocatable %v\nevents %v", n.Labels, n.Annotations, n.Status.Allocatable, f.EventsOf(node))
		}
	})
	g.Eventually(func() map[string]string { return f.Node(node).Labels }, 2*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)))
	f.ExpectAllReady(node)
	driver := f.PodOn(node, "driver")
	g.Expect(f.Node(node).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGAppliedUnder, fmt.Sprintf("boot-1/%s", driver.UID)))

	log := recordMIG(f)
	held := recordPluginHold(f, node)
	upgrades := f.RecordUpgrades()
	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectUpgradedWithin(upgrades, node, 3*time.Minute)
	// The MIG taint keeps GPU pods off until the devices are advertised
	// and settled, which may end after the upgrade.
	g.Eventually(func() []gpuv1.MIGReconfigureState { return log.Sequence(node) }, 2*time.Minute, controllertest.Interval).
		Should(Equal(migRestore), "%s", log)
	f.ExpectAllReady(node)
	t.Logf("a driver upgrade:\n%s", log)
	expectMIGDevices(g, f, node, "boot-1")
	g.Expect(f.EventsOf(node)).To(ContainElement(ContainSubstring("the MIG devices of \"all-1g.18gb\" are gone")))
	g.Expect(held.breaches()).To(BeEmpty(), "the device plugin waits for the devices")

	// A GPU pod, which nothing may evict: the restore evicts no pod.
	f.HeldGPUPod("mig-workload", node)
	workload := &corev1.Pod{}
	g.Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: "workloads", Name: "mig-workload"}, workload)).To(Succeed())
	log = recordMIG(f)
	held = recordPluginHold(f, node)
	suite.Sim.Set(node, "*", controllertest.StaysNotReady)
	f.SetBootID(node, "boot-2")
	g.Expect(suite.Sim.Restart(f.Ctx, node)).To(Succeed())
	suite.Sim.Set(node, "*", controllertest.BecomesReady)
	g.Eventually(func() []gpuv1.MIGReconfigureState { return log.Sequence(node) }, 2*time.Minute, controllertest.Interval).
		Should(Equal(migRestore), "%s", log)
	f.ExpectAllReady(node)
	t.Logf("a reboot:\n%s", log)
	expectMIGDevices(g, f, node, "boot-2")
	g.Expect(held.breaches()).To(BeEmpty(), "the device plugin waits for the devices")
	after := &corev1.Pod{}
	g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(workload), after)).To(Succeed())
	g.Expect(after.UID).To(Equal(workload.UID))
	g.Expect(after.DeletionTimestamp).To(BeNil(), "not evicted")
}

// expectMIGDevices checks the node advertises all-1g.18gb's devices,
// created under its boot and driver pod now.
func expectMIGDevices(g Gomega, f *controllertest.Fixture, node, bootID string) {
	n := f.Node(node)
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(56))
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-MIG-1g.18gb"))
	g.Expect(n.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGAppliedUnder, bootID+"/"+string(f.PodOn(node, "driver").UID)))
	g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
}

// pluginHold records, from a watch on a node, every version in which its
// MIG devices are gone and its mig-manager state is not pending: the
// gate of the device plugin, which must wait for the devices.
type pluginHold struct {
	mu  sync.Mutex
	bad []string
}

func recordPluginHold(f *controllertest.Fixture, node string) *pluginHold {
	h := &pluginHold{}
	f.WatchNodes(func(n *corev1.Node) {
		// Versions the operator has decided on: a reboot shows in the
		// status before the operator has seen it.
		if n.Annotations[gating.AnnotationBootID] != n.Status.NodeInfo.BootID || !gating.MIGDevicesLost(n) ||
			n.Labels[gpuv1.StateLabel("mig-manager")] == string(gpuv1.StatePending) {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.bad = append(h.bad, fmt.Sprintf("rv %s: mig-manager %s, which lets the device plugin start; MIG state %q", n.ResourceVersion,
			n.Labels[gpuv1.StateLabel("mig-manager")], n.Labels[gpuv1.LabelMIGReconfigureState]))
	}, client.MatchingFields{"metadata.name": node})
	return h
}

func (h *pluginHold) breaches() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bad)
}
