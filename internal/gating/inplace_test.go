package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

const restartGrace = 5 * time.Minute

// restarting is a driver pod seen restarting in place with digest d1.
func restarting(in *Input) {
	in.DriverRestartDigest, in.DriverRestartGrace = "d1", restartGrace
}

// A driver pod deleted with its configuration unchanged keeps the loaded
// modules: the states after it stay ready through the old pod's end, the
// gap before its successor, and the successor's start, and the successor
// once ready is taken for the same driver. Nothing after the driver
// restarts: no reset, no stale pod.
func TestDriverRestartInPlaceKeepsTheChain(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	pods[drv].ConfigDigest = "d1"

	// The old pod terminates (its facts are gone).
	delete(pods, drv)
	r := decide(t, n, pods, restarting)
	for _, s := range []state.Name{drv, tk, dp, dcg, gfd} {
		g.Expect(stateOf(r, s)).To(Equal("ready"), "state %s while the old pod ends", s)
	}
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDriverRestart, "d1@2026-11-30T12:00:00Z"))
	g.Expect(r.RequeueAfter).To(Equal(restartGrace))
	g.Expect(r.Events).To(BeEmpty())

	// The gap: no driver pod, and none seen restarting; the record holds.
	n = node(r.Labels, r.Annotations)
	r = decide(t, n, pods, func(in *Input) { in.DriverRestartGrace, in.Now = restartGrace, now.Add(time.Minute) })
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("ready"))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDriverRestart, "d1@2026-11-30T12:00:00Z"), "counted from the first sight")

	// The successor starts, not ready for longer than a short outage; the
	// observer sees no pod terminating any more: the record carries it.
	n = node(r.Labels, r.Annotations)
	successor := notReadyPod(now.Add(time.Minute))
	successor.UID, successor.ConfigDigest = "d2", "d1"
	pods[drv] = successor
	r = decide(t, n, pods, func(in *Input) { in.DriverRestartGrace, in.Now = restartGrace, now.Add(3*time.Minute) })
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("ready"))

	// Ready: the same driver, the record gone, nothing after it restarts.
	n = node(r.Labels, r.Annotations)
	pods[drv] = readyPod("d2", now.Add(4*time.Minute))
	pods[drv].ConfigDigest = "d1"
	r = decide(t, n, pods, func(in *Input) { in.DriverRestartGrace, in.Now = restartGrace, now.Add(4*time.Minute) })
	for _, s := range []state.Name{drv, tk, dp, dcg, gfd} {
		g.Expect(stateOf(r, s)).To(Equal("ready"), "state %s after the restart", s)
	}
	g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDriverRestart))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDriverPod, "d2"))
	g.Expect(r.StalePods).To(BeEmpty())
	g.Expect(r.Annotations[AnnotationNotBefore]).To(BeEmpty())
}

// Past its grace period a restart in place is a driver gone: the chain
// restarts from it, saying why.
func TestDriverRestartInPlaceEndsWithItsGrace(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	delete(pods, drv)
	r := decide(t, n, pods, restarting)
	n = node(r.Labels, r.Annotations)
	r = decide(t, n, pods, restarting, func(in *Input) { in.Now = now.Add(restartGrace) })
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.Why).To(HaveKeyWithValue(drv, "the driver pod restarting in place was not ready within 5m0s"))
	g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDriverRestart))
}

// What is not a restart in place takes the driver off as before: a
// driver pod terminating with another digest than its template's (the
// observer says unloading), a successor of another digest than the
// recorded one, a repair's driver reload, an upgrade's replacement.
func TestWhatIsNoDriverRestartInPlace(t *testing.T) {
	t.Run("unloading", func(t *testing.T) {
		g := NewWithT(t)
		n, pods := readyNode()
		delete(pods, drv)
		r := decide(t, n, pods, func(in *Input) { in.DriverUnloading, in.DriverRestartGrace = true, restartGrace })
		g.Expect(stateOf(r, drv)).To(Equal("pending"))
		g.Expect(stateOf(r, dp)).To(Equal("pending"))
	})
	t.Run("a successor of another digest", func(t *testing.T) {
		g := NewWithT(t)
		n, pods := readyNode()
		delete(pods, drv)
		r := decide(t, n, pods, restarting)
		n = node(r.Labels, r.Annotations)
		pods[drv] = readyPod("d2", now.Add(time.Minute))
		pods[drv].ConfigDigest = "other"
		r = decide(t, n, pods, func(in *Input) { in.DriverRestartGrace, in.Now = restartGrace, now.Add(2*time.Minute) })
		g.Expect(stateOf(r, drv)).To(Equal("pending"))
		g.Expect(r.Why).To(HaveKeyWithValue(drv, "a new driver pod was loaded"))
	})
	for name, label := range map[string][2]string{
		"a repair's driver reload":     {gpuv1.LabelRemediationState, string(gpuv1.RemediationDriverReload)},
		"an upgrade's driver replaced": {gpuv1.LabelUpgradeState, string(gpuv1.UpgradePodRestart)},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			n.Labels[label[0]] = label[1]
			delete(pods, drv)
			r := decide(t, n, pods, restarting)
			g.Expect(stateOf(r, drv)).NotTo(Equal("ready"), "the operation's own state value says what it does")
			g.Expect(stateOf(r, dp)).NotTo(Equal("ready"))
			g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDriverRestart))
		})
	}
}

// A driver restarting in place still runs: a label that gates its
// DaemonSet does not move under it, as it would where no driver runs.
func TestPoolLabelStaysThroughARestartInPlace(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.LabelDriverPool] = "a"
	delete(pods, drv)
	r := decide(t, n, pods, restarting, func(in *Input) { in.DriverPool = "b" })
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "a"))
	n = node(r.Labels, r.Annotations)
	r = decide(t, n, pods, func(in *Input) {
		in.DriverPool, in.DriverRestartGrace, in.Now = "b", restartGrace, now.Add(time.Minute)
	})
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "a"), "in the gap before the successor")
}
