package gating

import (
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Every replacement of a running driver goes through the upgrade (issue 12,
// finding 1). A node moved to another pool keeps its pool label, which
// gates the pool's DaemonSet, while its driver runs: moved at once, the old
// pool's DaemonSet would delete the driver under running workloads.
func TestPoolLabelMovesOnlyWithTheUpgrade(t *testing.T) {
	expectMovesOnlyWithTheUpgrade(t, gpuv1.LabelDriverPool, "a", "b", func(in *Input) { in.DriverPool = "b" })

	// A new node gets its pool at once, and a node in its pool keeps it.
	g := NewWithT(t)
	inPoolB := func(in *Input) { in.DriverPool = "b" }
	n, pods := readyNode()
	g.Expect(decide(t, n, pods, inPoolB).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "b"))
	n.Labels[gpuv1.LabelDriverPool] = "b"
	g.Expect(decide(t, n, pods, inPoolB).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "b"))
}

// expectMovesOnlyWithTheUpgrade checks a label that gates the node's
// driver DaemonSet: from from, the decision wants to; it moves only where
// no driver runs, or in the upgrade's step that replaces the driver, never
// in a repair's reload.
func expectMovesOnlyWithTheUpgrade(t *testing.T, key, from, to string, wants func(*Input)) {
	t.Helper()
	for _, tt := range []struct {
		name     string
		upgrade  gpuv1.UpgradeState
		repair   gpuv1.RemediationState
		noDriver bool
		moves    bool
	}{
		{name: "driver running"},
		// A repair's reload replaces the driver pod with one of the same
		// DaemonSet: another DaemonSet's driver would be an upgrade.
		{name: "a repair reloads the driver", repair: gpuv1.RemediationDriverReload},
		{name: "waiting for its upgrade", upgrade: gpuv1.UpgradeRequired},
		{name: "evicting its GPU pods", upgrade: gpuv1.UpgradePodDeletion},
		{name: "the upgrade replaces the driver", upgrade: gpuv1.UpgradePodRestart, moves: true},
		{name: "no driver pod", noDriver: true, moves: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			n.Labels[key] = from
			if tt.upgrade != "" {
				n.Labels[gpuv1.LabelUpgradeState] = string(tt.upgrade)
			}
			if tt.repair != "" {
				n.Labels[gpuv1.LabelRemediationState] = string(tt.repair)
			}
			if tt.noDriver {
				delete(pods, drv)
			}
			want := from
			if tt.moves {
				want = to
			}
			g.Expect(decide(t, n, pods, wants).Labels).To(HaveKeyWithValue(key, want))
		})
	}
}

// A terminating driver pod means its driver is unloading: the states after
// it restart at once, even while the replacement pod is already there, and
// do not wait out the grace period as a short outage would.
func TestTerminatingDriverResetsTheChainAtOnce(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	pods[drv] = notReadyPod(now) // the replacement, just created
	unloading := func(in *Input) { in.DriverUnloading = true }
	r := decide(t, n, pods, unloading)
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
	g.Expect(r.Why).To(HaveKeyWithValue(drv, "the previous driver pod is terminating"))
	g.Expect(r.Events).To(ContainElement(HaveField("Message", ContainSubstring("the driver is being unloaded"))))
	for _, s := range []state.Name{dp, dcg, gfd} {
		g.Expect(stateOf(r, s)).To(Equal("pending"), "state %s", s)
	}
	g.Expect(r.Annotations[AnnotationNotBefore]).To(ContainSubstring("device-plugin=2026-11-30T12:00:00Z"))

	// Without the terminating pod, the same not-ready replacement is a
	// short outage inside the grace period.
	n, pods = readyNode()
	pods[drv] = notReadyPod(now)
	r = decide(t, n, pods)
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(r.RequeueAfter).To(Equal(grace))

	// Once the old pod is gone, the new driver becoming ready re-forms the
	// chain: the device plugin must restart after it.
	n, pods = readyNode()
	r = decide(t, n, pods, unloading)
	pods[drv] = readyPod("d2", now.Add(time.Minute))
	r = decide(t, node(r.Labels, r.Annotations), pods, func(in *Input) { in.Now = now.Add(2 * time.Minute) })
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.Why).To(HaveKeyWithValue(dp, msgStalePod))
}

// A reboot noticed late (the operator was down: the pods restarted
// before it looked) used to delete the driver pod as stale (issue 12,
// finding 5). A driver pod that looks ready since before a reset is never
// deleted: within the grace period the kubelet is given time to report its
// restart, after it the pod is taken as it is. Any other state's pod is
// restarted once.
func TestStaleDriverPodIsNeverDeleted(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Annotations[AnnotationBootID] = "boot-0"
	r := decide(t, n, pods)
	g.Expect(reasons(r)).To(Equal([]string{"NodeRebooted"}))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationBootedAt, "2026-11-30T12:00:00Z"))
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
	g.Expect(r.Why).To(HaveKeyWithValue(drv, "its pod has not restarted since the reboot"))

	later := func(in *Input) { in.Now = now.Add(grace + time.Second) }
	r = decide(t, node(r.Labels, r.Annotations), pods, later)
	g.Expect(r.StalePods).NotTo(ContainElement(drv))
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(reasons(r)).To(ContainElement("DriverNotRestarted"))
	g.Expect(r.StalePods).To(ContainElement(tk), "the toolkit's stale pod is restarted")
	g.Expect(r.Annotations[AnnotationNotBefore]).NotTo(ContainSubstring("driver="))
}

// The time to ready after a reboot counts from the reboot, not from when
// the node was first discovered days before.
func TestReadyAfterRebootCountsFromTheReboot(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Annotations[AnnotationDiscoveredAt] = now.Add(-72 * time.Hour).Format(time.RFC3339)
	n.Annotations[AnnotationBootedAt] = now.Add(-3 * time.Minute).Format(time.RFC3339)
	n.Labels[gpuv1.StateLabel(string(gfd))] = "pending"
	r := decide(t, n, pods)
	g.Expect(r.BecameReady).To(BeTrue())
	g.Expect(r.ReadyAfter).To(Equal(3 * time.Minute))
}

// Discovery turns off once NFD has not found an NVIDIA device for the
// grace (issue 12, finding 6): the operator's own
// nvidia.com/gpu.present=true then no longer makes the node a GPU node. A
// user's label still does. Within the grace the node stays one, its labels
// as they were (issue 52, finding 1): NFD's labels flap when nfd-master
// restarts, and nothing in flight on the node may end with them.
func TestDiscoveryTurnsOffAfterTheGrace(t *testing.T) {
	g := NewWithT(t)
	const nfdGrace = 5 * time.Minute
	at := func(when time.Time) func(*Input) {
		return func(in *Input) { in.NFDGrace, in.Now = nfdGrace, when }
	}
	n, pods := readyNode()
	r := decide(t, n, pods, at(now))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationFoundBy, "nfd"))

	gone := node(r.Labels, r.Annotations)
	delete(gone.Labels, "feature.node.kubernetes.io/pci-10de.present")
	g.Expect(IsGPUNode(gone)).To(BeTrue(), "held for the grace")
	held := decide(t, gone, pods, at(now))
	g.Expect(held.Labels).To(Equal(r.Labels), "every label as it was: no DaemonSet drops a pod, no operation ends")
	g.Expect(held.Annotations).To(HaveKeyWithValue(AnnotationFoundBy, "nfd"))
	g.Expect(held.Annotations).To(HaveKeyWithValue(AnnotationNFDLostSince, now.Format(time.RFC3339)))
	g.Expect(held.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(held.RequeueAfter).To(BeNumerically("<=", nfdGrace))
	g.Expect(held.Events).To(ContainElement(HaveField("Reason", "NFDLabelsLost")))

	// Later in the grace, the loss keeps its time and is told once.
	gone.Annotations = held.Annotations
	later := decide(t, gone, pods, at(now.Add(nfdGrace-time.Second)))
	g.Expect(later.Labels).To(Equal(r.Labels))
	g.Expect(later.Annotations).To(HaveKeyWithValue(AnnotationNFDLostSince, now.Format(time.RFC3339)))
	g.Expect(later.Events).NotTo(ContainElement(HaveField("Reason", "NFDLabelsLost")))
	g.Expect(later.RequeueAfter).To(Equal(time.Second), "woken when the grace ends")

	// Back within the grace: as if nothing happened.
	back := node(later.Labels, later.Annotations)
	again := decide(t, back, pods, at(now.Add(time.Minute)))
	g.Expect(again.Annotations).NotTo(HaveKey(AnnotationNFDLostSince))
	g.Expect(again.Labels).To(Equal(r.Labels))

	// Gone past the grace: every operator label is to be removed.
	past := decide(t, gone, pods, at(now.Add(nfdGrace)))
	g.Expect(past.Labels).To(BeEmpty())
	g.Expect(past.Annotations).To(BeEmpty())
	g.Expect(IsGPUNode(node(nil, nil))).To(BeTrue(), "NFD's label alone makes a GPU node")
	bare := node(nil, nil)
	delete(bare.Labels, "feature.node.kubernetes.io/pci-10de.present")
	g.Expect(IsGPUNode(bare)).To(BeFalse(), "the node as written then is none")

	// With no grace set, at once.
	g.Expect(decide(t, gone, pods).Labels).To(BeEmpty())

	// The user's label, found as such, stays in force without NFD.
	users := node(map[string]string{gpuv1.LabelGPUPresent: "true"}, nil)
	delete(users.Labels, "feature.node.kubernetes.io/pci-10de.present")
	r = decide(t, users, nil)
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationFoundBy, "label"))
	g.Expect(IsGPUNode(node(r.Labels, r.Annotations))).To(BeTrue())
	g.Expect(r.Annotations).NotTo(HaveKey(AnnotationNFDLostSince))
}

// The states after a driver being replaced are reset once, when the step
// began. The step lasts as long as their pods take to leave the node: a
// reset stamped again at every decision would write the node each second of
// it, and each write would wake the controllers to write it again. Once the
// new driver is ready, they count from then, and a pod that was ready
// while the driver was being replaced raced it: it restarts at once.
func TestDriverRestartStampsTheResetOnce(t *testing.T) {
	g := NewWithT(t)
	onNode := func(r Result, step gpuv1.UpgradeState) *corev1.Node {
		labels := maps.Clone(r.Labels)
		labels[gpuv1.LabelUpgradeState] = string(step)
		return node(labels, maps.Clone(r.Annotations))
	}
	labels := variantLabels(states(allStates(gpuv1.StateReady)))
	labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradePodRestart)
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old)}
	first := decide(t, node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods)
	g.Expect(parseTimeMap(first.Annotations[AnnotationNotBefore])).To(And(
		HaveKeyWithValue(dp, now), HaveKeyWithValue(dcg, now), HaveKeyWithValue(gfd, now)))
	for _, later := range []time.Duration{3 * time.Second, 7 * time.Second} {
		r := decide(t, onNode(first, gpuv1.UpgradePodRestart), pods, func(in *Input) { in.Now = now.Add(later) })
		g.Expect(r.Labels).To(Equal(first.Labels), "%s into the step", later)
		g.Expect(r.Annotations).To(Equal(first.Annotations), "%s into the step", later)
	}

	ready := now.Add(10 * time.Second)
	pods = map[state.Name]*state.PodFacts{
		drv: readyPod("d2", ready.Add(-time.Second)), tk: readyPod("t1", old), dp: readyPod("p1", now.Add(time.Second)),
	}
	r := decide(t, onNode(first, gpuv1.UpgradeValidation), pods, func(in *Input) { in.Now = ready })
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(parseTimeMap(r.Annotations[AnnotationNotBefore])).To(HaveKeyWithValue(dp, ready))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.StalePods).To(ConsistOf(dp))
}

// Under NVIDIADrivers a node carries NVIDIA's owner label, the NVIDIADriver
// whose driver it runs: the pool label's value, moved with it, so a node
// waiting for its upgrade (or held by a conflict) still names the old
// owner, as NVIDIA's fail-closed owner does. Without NVIDIADrivers it has
// none.
func TestOwnerLabelFollowsThePoolLabel(t *testing.T) {
	g := NewWithT(t)
	fromNVIDIADrivers := func(pool string) func(*Input) {
		return func(in *Input) { in.DriverPool, in.DriverPoolsFromNVIDIADrivers = pool, true }
	}
	n, pods := readyNode()
	g.Expect(decide(t, n, pods, fromNVIDIADrivers("default")).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverOwner, "default"))
	g.Expect(decide(t, n, pods, func(in *Input) { in.DriverPool = "default" }).Labels).NotTo(HaveKey(gpuv1.LabelDriverOwner))

	n.Labels[gpuv1.LabelDriverPool] = "default"
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeRequired)
	r := decide(t, n, pods, fromNVIDIADrivers("demo-gold"))
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "default"), "the driver of default runs until its upgrade")
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverOwner, "default"))
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradePodRestart)
	g.Expect(decide(t, n, pods, fromNVIDIADrivers("demo-gold")).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverOwner, "demo-gold"))
}
