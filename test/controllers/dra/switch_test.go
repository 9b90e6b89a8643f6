package dra

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// modeTrail records, from a watch on the fixture's nodes, each node's
// allocation mode labels in the order they came, and every step from one
// plugin's mode straight to the other's: the kubelet would hand a GPU out
// twice if the DaemonSet controller started the new plugin before the old
// one left.
type modeTrail struct {
	mu     sync.Mutex
	last   map[string]gpuv1.AllocationMode
	trail  map[string][]gpuv1.AllocationMode
	breach []string
}

func recordModes(f *controllertest.Fixture) *modeTrail {
	m := &modeTrail{last: map[string]gpuv1.AllocationMode{}, trail: map[string][]gpuv1.AllocationMode{}}
	f.WatchOwnNodes(func(n *corev1.Node) {
		mode := gpuv1.AllocationMode(n.Labels[gpuv1.LabelAllocationMode])
		m.mu.Lock()
		defer m.mu.Unlock()
		last := m.last[n.Name]
		if mode == last {
			return
		}
		if last != "" && last != gpuv1.AllocationNone && mode != gpuv1.AllocationNone {
			m.breach = append(m.breach, fmt.Sprintf("%s: %s to %s at rv %s", n.Name, last, mode, n.ResourceVersion))
		}
		m.last[n.Name], m.trail[n.Name] = mode, append(m.trail[n.Name], mode)
	})
	return m
}

func (m *modeTrail) of(node string) []gpuv1.AllocationMode {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.trail[node])
}

func (m *modeTrail) breaches() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.breach)
}

// A pool of serving nodes moves to dra and back, one node at a time
// (maxParallelUpgrades 1): each is tainted, its GPU pods evicted (a
// PodDisruptionBudget holds the first one until it lets go, the other
// waits for the place), its device plugin leaves with the mode none, the
// DRA driver starts and proves itself by its slices, and the taint goes.
// Back the same way, the slices deleted. The driver and the toolkit never
// restart, and no node ever goes from one plugin's mode to the other's.
func TestPoolSwitchesToDRAAndBack(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	f.ExpectAllReady(f.Nodes...)
	held := f.HeldGPUPod("switch-trainer", f.Nodes[0])
	driver, toolkit := f.PodOn(f.Nodes[0], "driver").UID, f.PodOn(f.Nodes[0], "container-toolkit").UID
	log := controllertest.RecordStates(f, gpuv1.LabelModeSwitchState, modeswitch.Tainted, func(n *corev1.Node) string {
		return "mode=" + n.Labels[gpuv1.LabelAllocationMode]
	})
	modes := recordModes(f)

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA })
	g.Eventually(func() string { return f.Node(f.Nodes[0]).Labels[gpuv1.LabelModeSwitchState] }, time.Minute, controllertest.Interval).
		Should(Equal(string(gpuv1.ModeSwitchEviction)), "%s", log)
	// One node at a time: the other is queued behind the first, which
	// holds the place until its GPU pod goes. It may be marked
	// switch-required a look after the first starts (a switch of its own
	// may end in the look that marks the first, both written side by
	// side). That it never starts meanwhile is the log's peak, checked
	// once both switched: it records every state of both nodes.
	g.Eventually(func() string { return f.Node(f.Nodes[1]).Labels[gpuv1.LabelModeSwitchState] }, time.Minute, controllertest.Interval).
		Should(Equal(string(gpuv1.ModeSwitchRequired)), "queued behind the first\n%s", log)
	g.Expect(f.Node(f.Nodes[0]).Spec.Taints).To(ContainElement(HaveField("Key", gpuv1.TaintModeSwitching)))
	f.ExpectState("ready", "device-plugin", f.Nodes[0]) // the plugin serves until the GPU pods are gone
	g.Expect(suite.Client.Delete(f.Ctx, held)).To(Succeed())

	switched := func(mode gpuv1.AllocationMode) {
		t.Helper()
		for _, n := range f.Nodes {
			g.Eventually(func() map[string]string { return f.Node(n).Labels }, 3*time.Minute, controllertest.Interval).
				Should(And(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchDone)),
					HaveKeyWithValue(gpuv1.LabelAllocationMode, string(mode))), "%s\n%s", n, log)
		}
		plugin, off := "device-plugin", "dra-driver"
		if mode == gpuv1.AllocationDRA {
			plugin, off = off, plugin
		}
		for _, s := range []string{"driver", "container-toolkit", plugin, "dcgm-exporter", "gpu-feature-discovery"} {
			f.ExpectState("ready", s, f.Nodes...)
		}
		f.ExpectState("disabled", off, f.Nodes...)
		for _, n := range f.Nodes {
			node := f.Node(n)
			g.Expect(node.Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintModeSwitching)))
			g.Expect(node.Annotations).NotTo(HaveKey(gpuv1.AnnotationModeSwitchHold))
		}
	}
	switched(gpuv1.AllocationDRA)
	t.Logf("the pool's switch to dra:\n%s", log)
	g.Expect(log.Peak()).To(Equal(1), "maxParallelUpgrades 1:\n%s", log)
	want := []gpuv1.ModeSwitchState{gpuv1.ModeSwitchRequired, gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff,
		gpuv1.ModeSwitchPluginOn, gpuv1.ModeSwitchDone}
	for _, n := range f.Nodes {
		g.Eventually(func() []gpuv1.ModeSwitchState { return log.Sequence(n) }, controllertest.Timeout, controllertest.Interval).
			Should(Equal(want), "%s\n%s", n, log)
		g.Expect(f.PodOn(n, "device-plugin")).To(BeNil())
		g.Expect(f.PodOn(n, "dra-driver")).NotTo(BeNil())
		g.Expect(f.StateOf(n, "device-plugin")()).To(Equal("disabled"))
	}
	g.Expect(f.PodOn(f.Nodes[0], "driver").UID).To(Equal(driver), "the driver stays")
	g.Expect(f.PodOn(f.Nodes[0], "container-toolkit").UID).To(Equal(toolkit), "the toolkit stays")
	g.Expect(f.EventsOf(f.Nodes[0])).To(ContainElement(ContainSubstring("plugins-off-required -> plugin-on-required")))

	// Back to the device plugin: the DRA driver leaves, its slices go.
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDevicePlugin })
	for _, n := range f.Nodes {
		g.Eventually(func() map[string]string { return f.Node(n).Labels }, 3*time.Minute, controllertest.Interval).
			Should(And(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchDone)),
				HaveKeyWithValue(gpuv1.LabelAllocationMode, string(gpuv1.AllocationDevicePlugin))), "%s\n%s", n, log)
	}
	switched(gpuv1.AllocationDevicePlugin)
	t.Logf("and back:\n%s", log)
	g.Expect(log.Peak()).To(Equal(1), "maxParallelUpgrades 1:\n%s", log)
	for _, n := range f.Nodes {
		g.Expect(f.PodOn(n, "dra-driver")).To(BeNil())
		slices := &resourcev1.ResourceSliceList{}
		g.Expect(suite.Client.List(f.Ctx, slices, client.MatchingFields{"spec.nodeName": n})).To(Succeed())
		g.Expect(slices.Items).To(BeEmpty(), "%s: the DRA driver's slices are gone", n)
		g.Expect(modes.of(n)).To(Equal([]gpuv1.AllocationMode{gpuv1.AllocationDevicePlugin, gpuv1.AllocationNone, gpuv1.AllocationDRA,
			gpuv1.AllocationNone, gpuv1.AllocationDevicePlugin}), n)
	}
	g.Expect(modes.breaches()).To(BeEmpty())
	g.Expect(f.PodOn(f.Nodes[0], "driver").UID).To(Equal(driver))
	g.Expect(f.PodOn(f.Nodes[0], "container-toolkit").UID).To(Equal(toolkit))
}

// The pool moves back while a node's DRA driver starts (it never gets
// ready here): the switch turns round through the eviction and mode none,
// and the node ends on the device plugin, untainted.
func TestSwitchTurnsRoundWhenThePoolMovesBack(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	suite.Sim.Set(node, "dra-driver", controllertest.StaysNotReady)
	t.Cleanup(func() { suite.Sim.Set(node, "dra-driver", controllertest.BecomesReady) })
	modes := recordModes(f)
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA })
	g.Eventually(func() map[string]string { return f.Node(node).Labels }, time.Minute, controllertest.Interval).
		Should(And(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchPluginOn)),
			HaveKeyWithValue(gpuv1.LabelAllocationMode, string(gpuv1.AllocationDRA))))
	f.ExpectState("pending", "dra-driver", node)
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDevicePlugin })
	g.Eventually(func() map[string]string { return f.Node(node).Labels }, 3*time.Minute, controllertest.Interval).
		Should(And(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchDone)),
			HaveKeyWithValue(gpuv1.LabelAllocationMode, string(gpuv1.AllocationDevicePlugin))))
	f.ExpectAllReady(node)
	g.Expect(f.Node(node).Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintModeSwitching)))
	g.Expect(modes.breaches()).To(BeEmpty())
	g.Expect(f.PodOn(node, "dra-driver")).To(BeNil())
	g.Expect(f.EventsOf(node)).To(ContainElement(ContainSubstring("plugin-on-required -> eviction-required")), "it turned round")
	g.Expect(modes.of(node)).To(Equal([]gpuv1.AllocationMode{gpuv1.AllocationDevicePlugin, gpuv1.AllocationNone, gpuv1.AllocationDRA,
		gpuv1.AllocationNone, gpuv1.AllocationDevicePlugin}))
}
