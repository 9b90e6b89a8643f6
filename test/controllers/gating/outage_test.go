package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// A NotReady blip shorter than the suite.Timers.ReadyGrace period keeps the chain.
func TestShortBlipKeepsTheChain(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	toolkit := f.PodOn(node, "container-toolkit").UID
	driverState := f.WatchLabel(node, gpuv1.StateLabel("driver"))
	pluginState := f.WatchLabel(node, gpuv1.StateLabel("device-plugin"))

	suite.Sim.Set(node, "driver", controllertest.StaysNotReady)
	g.Eventually(func() bool {
		return controllertest.ReadyCondition(f.PodOn(node, "driver")).Status == corev1.ConditionFalse
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	time.Sleep(suite.Timers.ReadyGrace / 2)
	suite.Sim.Set(node, "driver", controllertest.BecomesReady)
	g.Eventually(func() bool {
		return controllertest.ReadyCondition(f.PodOn(node, "driver")).Status == corev1.ConditionTrue
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	// Past the suite.Timers.ReadyGrace period counted from the blip: a reset would have
	// happened by now. Every value the labels took is in the watch's
	// history, however short.
	time.Sleep(suite.Timers.ReadyGrace)
	g.Expect(driverState.Seen()).To(Equal([]string{"ready"}))
	g.Expect(pluginState.Seen()).To(Equal([]string{"ready"}))
	g.Expect(f.PodOn(node, "container-toolkit").UID).To(Equal(toolkit), "the toolkit pod must not restart")
}

// An outage longer than the suite.Timers.ReadyGrace period resets everything after the
// state, which then re-forms in order with fresh pods.
func TestLongOutageResetsDownstream(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	plugin := f.PodOn(node, "device-plugin").UID

	suite.Sim.Set(node, "container-toolkit", controllertest.StaysNotReady)
	f.ExpectState("pending", "container-toolkit", node)
	f.ExpectState("pending", "device-plugin", node)
	g.Expect(f.StateOf(node, "driver")()).To(Equal("ready"), "what comes before the outage is untouched")
	g.Eventually(func() *corev1.Pod { return f.PodOn(node, "device-plugin") }, controllertest.Timeout, controllertest.Interval).Should(BeNil())

	suite.Sim.Set(node, "container-toolkit", controllertest.BecomesReady)
	f.ExpectAllReady(node)
	g.Expect(f.PodOn(node, "device-plugin").UID).NotTo(Equal(plugin), "the device plugin restarted")
}

// A failed judgement resets the controllertest.States after it.
func TestFailedStateResetsDownstream(t *testing.T) {
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)

	suite.Sim.Set(node, "device-plugin", controllertest.CrashLoops)
	f.ExpectState("failed", "device-plugin", node)
	f.ExpectState("pending", "dcgm-exporter", node)
	f.ExpectState("pending", "gpu-feature-discovery", node)
	f.ExpectState("ready", "container-toolkit", node)

	suite.Sim.Set(node, "device-plugin", controllertest.BecomesReady)
	f.ExpectAllReady(node)
}

// A driver pod deleted with its configuration unchanged is replaced by
// one of the same digest, which keeps the loaded modules: nothing after
// the driver restarts, and no state of the chain ever leaves ready. (A
// driver replaced with another configuration goes through the upgrade,
// which takes everything after it off the node first: test/controllers/
// upgrade; a successor of another digest resets the chain:
// TestWhatIsNoDriverRestartInPlace, internal/gating.)
func TestDeletedDriverPodRestartsInPlace(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	oldDriver, oldToolkit, oldPlugin := f.PodOn(node, "driver"), f.PodOn(node, "container-toolkit").UID, f.PodOn(node, "device-plugin").UID
	states := map[string]*controllertest.StateLog[gpuv1.StateValue]{}
	for _, s := range []string{"driver", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"} {
		states[s] = controllertest.RecordStates(f, gpuv1.StateLabel(s), func(v gpuv1.StateValue) bool { return v != gpuv1.StateReady },
			func(n *corev1.Node) string {
				return "driver-pod=" + n.Annotations["nvidia.com/gpu-operator.driver-pod"]
			})
	}

	// As a person does (kubectl delete pod): gracefully, and the driver
	// container takes a while to stop. A forced delete leaves nothing to
	// see of the pod's end, and is taken for a driver gone, which resets
	// the chain: the safe reading.
	suite.Sim.SetDriverStopTime(time.Second)
	defer suite.Sim.SetDriverStopTime(0)
	g.Expect(suite.Client.Delete(f.Ctx, oldDriver)).To(Succeed())
	g.Eventually(func() bool {
		p := f.PodOn(node, "driver")
		return p != nil && p.UID != oldDriver.UID && controllertest.ReadyCondition(p) != nil &&
			controllertest.ReadyCondition(p).Status == corev1.ConditionTrue
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue(), "the successor runs")
	g.Eventually(func() string { return f.Node(node).Annotations["nvidia.com/gpu-operator.driver-pod"] },
		controllertest.Timeout, controllertest.Interval).Should(Equal(string(f.PodOn(node, "driver").UID)), "the operator took it for the driver")
	f.ExpectAllReady(node)
	for s, log := range states {
		g.Expect(log.Peak()).To(BeZero(), "state %s left ready:\n%s", s, log)
	}
	g.Expect(f.PodOn(node, "device-plugin").UID).To(Equal(oldPlugin), "what uses the driver runs on")
	g.Expect(f.PodOn(node, "container-toolkit").UID).To(Equal(oldToolkit))
}

// A reboot (new boot ID) resets the node's chain from the driver down in one
// label write, and the chain re-forms in order.
func TestRebootResetsTheChainInOnePatch(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	node, other := f.Nodes[0], f.Nodes[1]
	f.ExpectAllReady(f.Nodes...)

	w, err := suite.WatchClient.Watch(f.Ctx, &corev1.NodeList{}, client.MatchingFields{"metadata.name": node})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	suite.Sim.Set(node, "*", controllertest.StaysNotReady)
	f.SetBootID(node, "boot-2")
	g.Expect(suite.Sim.Restart(f.Ctx, node)).To(Succeed())

	// The first label change after the reboot has every state pending.
	var first map[string]string
	g.Eventually(func() bool {
		select {
		case ev := <-w.ResultChan():
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Modified && n.Labels[gpuv1.StateLabel("driver")] != "ready" {
				first = n.Labels
				return true
			}
		default:
		}
		return false
	}, controllertest.Timeout, 10*time.Millisecond).Should(BeTrue())
	for _, s := range controllertest.States {
		g.Expect(first).To(HaveKeyWithValue(gpuv1.StateLabel(s), "pending"), "state %s in the first write after the reboot", s)
	}
	g.Expect(f.Node(node).Annotations).To(HaveKeyWithValue("nvidia.com/gpu-operator.boot-id", "boot-2"))
	for _, s := range controllertest.States {
		g.Expect(f.StateOf(other, s)()).To(Equal("ready"), "the other node is untouched")
	}

	suite.Sim.Set(node, "*", controllertest.BecomesReady)
	f.ExpectAllReady(node)
}
