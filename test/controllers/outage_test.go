package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// A NotReady blip shorter than the grace period keeps the chain.
func TestShortBlipKeepsTheChain(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	node := f.nodes[0]
	f.expectAllReady(node)
	toolkit := f.podOn(node, "container-toolkit").UID
	driverState := f.watchLabel(node, gpuv1.StateLabel("driver"))
	pluginState := f.watchLabel(node, gpuv1.StateLabel("device-plugin"))

	sim.set(node, "driver", staysNotReady)
	g.Eventually(func() bool { return readyCondition(f.podOn(node, "driver")).Status == corev1.ConditionFalse }, timeout, interval).Should(BeTrue())
	time.Sleep(grace / 2)
	sim.set(node, "driver", becomesReady)
	g.Eventually(func() bool { return readyCondition(f.podOn(node, "driver")).Status == corev1.ConditionTrue }, timeout, interval).Should(BeTrue())
	// Past the grace period counted from the blip: a reset would have
	// happened by now. Every value the labels took is in the watch's
	// history, however short.
	time.Sleep(grace)
	g.Expect(driverState.seen()).To(Equal([]string{"ready"}))
	g.Expect(pluginState.seen()).To(Equal([]string{"ready"}))
	g.Expect(f.podOn(node, "container-toolkit").UID).To(Equal(toolkit), "the toolkit pod must not restart")
}

// An outage longer than the grace period resets everything after the
// state, which then re-forms in order with fresh pods.
func TestLongOutageResetsDownstream(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	node := f.nodes[0]
	f.expectAllReady(node)
	plugin := f.podOn(node, "device-plugin").UID

	sim.set(node, "container-toolkit", staysNotReady)
	f.expectState("pending", "container-toolkit", node)
	f.expectState("pending", "device-plugin", node)
	g.Expect(f.stateOf(node, "driver")()).To(Equal("ready"), "what comes before the outage is untouched")
	g.Eventually(func() *corev1.Pod { return f.podOn(node, "device-plugin") }, timeout, interval).Should(BeNil())

	sim.set(node, "container-toolkit", becomesReady)
	f.expectAllReady(node)
	g.Expect(f.podOn(node, "device-plugin").UID).NotTo(Equal(plugin), "the device plugin restarted")
}

// A failed judgement resets the states after it.
func TestFailedStateResetsDownstream(t *testing.T) {
	f := setup(t, 1)
	node := f.nodes[0]
	f.expectAllReady(node)

	sim.set(node, "device-plugin", crashLoops)
	f.expectState("failed", "device-plugin", node)
	f.expectState("pending", "dcgm-exporter", node)
	f.expectState("pending", "gpu-feature-discovery", node)
	f.expectState("ready", "container-toolkit", node)

	sim.set(node, "device-plugin", becomesReady)
	f.expectAllReady(node)
}

// Replacing the driver pod loads a new driver: everything after it
// restarts, in order.
func TestReplacedDriverRestartsDownstream(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	node := f.nodes[0]
	f.expectAllReady(node)
	oldDriver, oldToolkit, oldPlugin := f.podOn(node, "driver"), f.podOn(node, "container-toolkit").UID, f.podOn(node, "device-plugin").UID

	g.Expect(k8sClient.Delete(f.ctx, oldDriver, client.GracePeriodSeconds(0))).To(Succeed())
	f.expectState("pending", "device-plugin", node)
	f.expectAllReady(node)
	g.Expect(f.podOn(node, "driver").UID).NotTo(Equal(oldDriver.UID))
	g.Expect(f.podOn(node, "device-plugin").UID).NotTo(Equal(oldPlugin), "what uses the driver restarts")
	g.Expect(f.podOn(node, "container-toolkit").UID).To(Equal(oldToolkit),
		"the toolkit stays: tearing it down would revert the runtime's config and restart the runtime twice")
}

// A reboot (new boot ID) resets the node's chain from the driver down in one
// label write, and the chain re-forms in order.
func TestRebootResetsTheChainInOnePatch(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2)
	node, other := f.nodes[0], f.nodes[1]
	f.expectAllReady(f.nodes...)

	w, err := watchClient.Watch(f.ctx, &corev1.NodeList{}, client.MatchingFields{"metadata.name": node})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	sim.set(node, "*", staysNotReady)
	f.setBootID(node, "boot-2")
	g.Expect(sim.restart(f.ctx, node)).To(Succeed())

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
	}, timeout, 10*time.Millisecond).Should(BeTrue())
	for _, s := range states {
		g.Expect(first).To(HaveKeyWithValue(gpuv1.StateLabel(s), "pending"), "state %s in the first write after the reboot", s)
	}
	g.Expect(f.node(node).Annotations).To(HaveKeyWithValue("nvidia.com/gpu-operator.boot-id", "boot-2"))
	for _, s := range states {
		g.Expect(f.stateOf(other, s)()).To(Equal("ready"), "the other node is untouched")
	}

	sim.set(node, "*", becomesReady)
	f.expectAllReady(node)
}
