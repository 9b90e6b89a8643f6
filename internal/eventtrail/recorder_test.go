package eventtrail

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// testRecorder is a Recorder on fake events whose clock the test moves,
// that writes at once and keeps trails for a minute.
func testRecorder(t *testing.T, api *fakeEvents, now *time.Time) *Recorder {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := New(api, scheme, logr.Discard(), Options{Controller: "gpu-operator", Instance: "gpu-operator-x",
		Keep: time.Minute, Remember: time.Hour, Tries: 3, Now: func() time.Time { return *now }})
	t.Cleanup(r.queue.ShutDown)
	return r
}

func gpuNode() *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", UID: "uid-1", ResourceVersion: "7"},
	}
}

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

// expectTrail checks the one Event stored: its steps, newest first, and
// its count. It returns the Event.
func expectTrail(g Gomega, api *fakeEvents, count int, steps ...string) *corev1.Event {
	ev := api.only()
	g.ExpectWithOffset(1, Steps(ev.Message)).To(Equal(steps))
	g.ExpectWithOffset(1, ev.Count).To(BeEquivalentTo(count))
	return ev
}

func TestABurstOfStepsIsOneEventNewestFirst(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "%s -> %s", "upgrade-required", "cordon-required")
	now = now.Add(time.Second)
	n.ResourceVersion = "8"
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "cordon-required -> drain-required")
	g.Expect(r.next(context.Background())).To(BeTrue())

	g.Expect(api.calls).To(Equal([]string{"create"}))
	ev := api.only()
	g.Expect(ev.Namespace).To(Equal("default"), "a node's events live in default")
	g.Expect(ev.InvolvedObject).To(Equal(corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "gpu-node-1", UID: "uid-1"}),
		"the Event names the node, not one of its versions")
	g.Expect(ev.Count).To(BeEquivalentTo(2))
	g.Expect(ev.FirstTimestamp.Time).To(BeTemporally("==", t0))
	g.Expect(ev.LastTimestamp.Time).To(Equal(t0.Add(time.Second)))
	g.Expect(ev.Message).To(Equal("09:00:01Z cordon-required -> drain-required | 09:00:00Z upgrade-required -> cordon-required"))
	g.Expect(Steps(ev.Message)).To(Equal([]string{"cordon-required -> drain-required", "upgrade-required -> cordon-required"}))
	g.Expect(ev.ReportingController).To(Equal("gpu-operator"))
	g.Expect(ev.Source.Component).To(Equal("gpu-operator"))
}

func TestTheNextStepUpdatesTheSameEvent(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "one")
	r.next(context.Background())
	now = now.Add(time.Minute)
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "two")
	r.next(context.Background())

	g.Expect(api.calls).To(Equal([]string{"create", "patch"}), "no read: the trail was in memory")
	ev := expectTrail(g, api, 2, "two", "one")
	g.Expect(ev.FirstTimestamp.Time).To(BeTemporally("==", t0))
}

func TestAnotherObjectReasonOrTypeIsAnotherEvent(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "a step")
	r.Eventf(n, nil, corev1.EventTypeWarning, "DriverUpgrade", "Upgrade", "a failure")
	r.Eventf(n, nil, corev1.EventTypeNormal, "MaintenanceWaiting", "Wait", "a wait")
	// Another object without a UID (built in memory) of the same name.
	r.Eventf(&corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1"}}, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "another object")
	for range 4 {
		r.next(context.Background())
	}
	g.Expect(api.stored).To(HaveLen(4))
	for _, ev := range api.stored {
		g.Expect(ev.Count).To(BeEquivalentTo(1), ev.Name)
	}
}

// A restarted operator, or a new leader, goes on with the trail it finds.
func TestARestartedRecorderGoesOnWithTheTrail(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	before := testRecorder(t, api, &now)
	n := gpuNode()
	before.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "before the restart")
	before.next(context.Background())

	now = now.Add(time.Minute)
	after := testRecorder(t, api, &now)
	after.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "after the restart")
	after.next(context.Background())

	g.Expect(api.calls).To(Equal([]string{"create", "create", "get", "patch"}))
	ev := expectTrail(g, api, 2, "after the restart", "before the restart")
	g.Expect(ev.FirstTimestamp.Time).To(BeTemporally("==", t0))
}

func TestAnEventChangedByAnotherWriterIsReadBack(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "mine")
	r.next(context.Background())
	theirs := api.only()
	theirs.Message, theirs.Count = "09:00:00Z theirs | "+theirs.Message, 2
	api.put(theirs)

	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "mine again")
	r.next(context.Background())
	expectTrail(g, api, 3, "mine again", "theirs", "mine")
}

// The API server deletes events an hour old (its event TTL): the trail
// starts afresh.
func TestADeletedEventStartsAfresh(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "old")
	r.next(context.Background())
	api.stored = map[string]*corev1.Event{}

	now = now.Add(30 * time.Second)
	r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "new")
	r.next(context.Background())
	ev := expectTrail(g, api, 1, "new")
	g.Expect(ev.FirstTimestamp.Time).To(Equal(now))
}

// A trail idle for Keep leaves memory; its Event is remembered, and read
// rather than created, for Remember.
func TestAnIdleTrailLeavesMemory(t *testing.T) {
	for name, tt := range map[string]struct {
		remember time.Duration
		calls    []string
	}{
		"remembered": {remember: time.Hour, calls: []string{"create", "get", "patch"}},
		"forgotten":  {remember: 0, calls: []string{"create", "create", "get", "patch"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			api, now := newFakeEvents(), t0
			r := testRecorder(t, api, &now)
			r.opts.Keep, r.opts.Remember = 0, tt.remember
			n := gpuNode()
			r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "one")
			r.next(context.Background())
			g.Expect(r.entries).To(HaveLen(1))
			r.next(context.Background())
			g.Expect(r.entries).To(BeEmpty(), "Keep has passed since its last write")
			if tt.remember == 0 {
				g.Expect(r.known).To(BeEmpty())
			} else {
				g.Expect(r.known).To(HaveLen(1))
			}

			r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "two")
			r.next(context.Background())
			g.Expect(api.calls).To(Equal(tt.calls), "the trail is read back")
			g.Expect(Steps(api.only().Message)).To(Equal([]string{"two", "one"}))
			g.Expect(r.known).To(BeEmpty())
		})
	}
}

func TestAnAPIServerThatRefusesWritesCostsOneMessagePerEvent(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	api.fail = errors.New("connection refused")
	n := gpuNode()
	for i := range 1000 {
		r.Eventf(n, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "step %d of a long wait", i)
	}
	e := r.entries[key{uid: "uid-1", kind: "Node", name: "gpu-node-1", reason: "DriverUpgrade", typ: corev1.EventTypeNormal}]
	g.Expect(len(trail(e.pending, ""))).To(BeNumerically("<=", noteLimit))
	g.Expect(e.unwritten).To(BeEquivalentTo(1000))

	r.next(context.Background())
	g.Expect(api.stored).To(BeEmpty())
	api.fail = nil
	r.next(context.Background())
	ev := api.only()
	g.Expect(ev.Count).To(BeEquivalentTo(1000), "every step is counted, those cut for room too")
	g.Expect(Steps(ev.Message)[0]).To(Equal("step 999 of a long wait"))
	g.Expect(len(ev.Message)).To(BeNumerically("<=", noteLimit))
}

func TestStepsAreDroppedAfterTheirTries(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	api.fail = errors.New("connection refused")
	r.Eventf(gpuNode(), nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade", "lost")
	for range r.opts.Tries {
		r.next(context.Background())
	}
	g.Expect(r.entries).To(BeEmpty(), "nothing is held for an Event never written")
	g.Expect(r.queue.Len()).To(BeZero())
}

func TestTheTrailKeepsTheNewestStepsThatFit(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("x", 300)
	var steps []step
	for i := range 5 {
		steps = append(steps, step{at: t0.Add(time.Duration(i) * time.Second), text: long})
	}
	msg := trail(steps, "")
	g.Expect(len(msg)).To(BeNumerically("<=", noteLimit))
	g.Expect(Steps(msg)).To(HaveLen(3))
	g.Expect(msg).To(HavePrefix("09:00:04Z "))

	cutOne := trail([]step{{at: t0, text: "a" + strings.Repeat("é", 600)}}, "")
	g.Expect(len(cutOne)).To(Equal(noteLimit-1), "one step longer than the limit is cut on a rune")
	g.Expect(utf8.ValidString(cutOne)).To(BeTrue())
	g.Expect(Steps("a message another writer wrote")).To(Equal([]string{"a message another writer wrote"}))
}

// A step that repeats the newest (a pod keeping a node waiting, at every
// look) adds no line and no write of its own: it is counted, and written
// with the next step that differs, or once Keep has passed since the last
// write.
func TestARepeatedStepIsCountedNotWritten(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	waiting := "pod workloads/training keeps the node waiting"
	r.Eventf(n, nil, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict", "%s", waiting)
	r.next(context.Background())
	for range 5 {
		now = now.Add(5 * time.Second)
		r.Eventf(n, nil, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict", "%s", waiting)
	}
	g.Expect(api.calls).To(Equal([]string{"create"}), "a repeat is not written on its own")

	r.Eventf(n, nil, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict", "%s", "pod workloads/training evicted")
	r.Eventf(n, nil, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict", "%s", "pod workloads/training evicted")
	r.next(context.Background())
	g.Expect(api.calls).To(Equal([]string{"create", "patch"}))
	ev := expectTrail(g, api, 8, "pod workloads/training evicted", waiting)
	g.Expect(ev.LastTimestamp.Time).To(BeTemporally("==", now))

	// Only repeats since the last write: written once Keep has passed,
	// when the Keep timer the write set fires (here, by hand).
	k := key{uid: "uid-1", kind: "Node", name: "gpu-node-1", reason: "GPUDriverUpgrade", typ: corev1.EventTypeWarning}
	now = now.Add(time.Second)
	seen := now
	r.Eventf(n, nil, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict", "%s", "pod workloads/training evicted")
	r.queue.Add(k)
	r.next(context.Background())
	g.Expect(api.calls).To(Equal([]string{"create", "patch"}), "Keep has not passed")
	now = now.Add(r.opts.Keep)
	r.queue.Add(k)
	r.next(context.Background())
	g.Expect(api.calls).To(Equal([]string{"create", "patch", "patch"}))
	ev = expectTrail(g, api, 9, "pod workloads/training evicted", waiting)
	g.Expect(ev.LastTimestamp.Time).To(BeTemporally("==", seen))
}

// A step is a repeat only of the newest step recorded, whether or not it
// is written yet: A, B, A is three lines, and A, A while A is being
// written is one.
func TestARepeatIsOfTheNewestStepOnly(t *testing.T) {
	g := NewWithT(t)
	api, now := newFakeEvents(), t0
	r := testRecorder(t, api, &now)
	n := gpuNode()
	for _, text := range []string{"a", "b", "a"} {
		r.Eventf(n, nil, corev1.EventTypeNormal, "GPUDriverUpgrade", "Upgrade", "%s", text)
		r.next(context.Background())
	}
	expectTrail(g, api, 3, "a", "b", "a")

	// The newest step taken to be written, not yet written, repeated.
	k := key{uid: "uid-1", kind: "Node", name: "gpu-node-1", reason: "GPUDriverUpgrade", typ: corev1.EventTypeNormal}
	r.Eventf(n, nil, corev1.EventTypeNormal, "GPUDriverUpgrade", "Upgrade", "c")
	r.mu.Lock()
	r.entries[k].pending, r.entries[k].unwritten = nil, 0 // as next does while it writes
	r.mu.Unlock()
	r.Eventf(n, nil, corev1.EventTypeNormal, "GPUDriverUpgrade", "Upgrade", "c")
	g.Expect(r.entries[k].pending).To(BeEmpty(), "a repeat of the step being written")
}
