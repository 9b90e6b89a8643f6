package eventtrail

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
)

// The memory an upgrade's events hold, after a fleet's nodes each took
// upgradeSteps steps (the upgrade recorded 9.9 events a node in
// docs/scale.md's run Q): this package's trails against client-go's
// tools/events, which the operator used before. Run with
//
//	go test ./internal/eventtrail -run '^$' -bench HeldAfter -benchtime 1x
//
// MB-held is the live heap the recorder keeps once every event is written.
const (
	fleetNodes   = 1000
	upgradeSteps = 10
)

func BenchmarkHeldAfterAnUpgrade(b *testing.B) {
	b.Run("eventtrail", func(b *testing.B) {
		for range b.N {
			rec := New(discardingEvents{}, scheme.Scheme, logr.Discard(), Options{
				Controller: "gpu-operator", Instance: "gpu-operator-x", Keep: time.Hour, Tries: 3})
			ctx, cancel := context.WithCancel(context.Background())
			go func() { _ = rec.Start(ctx) }()
			held := heldBy(b, func() {
				record(rec)
				for !rec.written() {
					time.Sleep(10 * time.Millisecond)
				}
			})
			b.ReportMetric(held/1e6, "MB-held")
			runtime.KeepAlive(rec)
			cancel()
		}
	})
	b.Run("client-go", func(b *testing.B) {
		for range b.N {
			sink := &countingSink{}
			broadcaster := events.NewBroadcaster(sink)
			ctx, cancel := context.WithCancel(context.Background())
			if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
				b.Fatal(err)
			}
			rec := broadcaster.NewRecorder(scheme.Scheme, "gpu-operator")
			held := heldBy(b, func() {
				// The broadcaster drops what its queue of 1000 cannot
				// hold: a node's steps at a time, each written before
				// the next node's.
				for n := range fleetNodes {
					recordNode(rec, n)
					for sink.created.Load() < int64((n+1)*upgradeSteps) {
						time.Sleep(time.Millisecond)
					}
				}
			})
			b.ReportMetric(held/1e6, "MB-held")
			runtime.KeepAlive(broadcaster)
			cancel()
			broadcaster.Shutdown()
		}
	})
}

// heldBy is how many bytes of live heap fn leaves behind.
func heldBy(b *testing.B, fn func()) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

func record(rec events.EventRecorder) {
	for n := range fleetNodes {
		recordNode(rec, n)
	}
}

// recordNode records one node's upgrade, as the maintenance controller
// does: one event a step, the node at a new version each time.
func recordNode(rec events.EventRecorder, n int) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-node-%d", n), UID: types.UID(fmt.Sprintf("0b7c4f1e-5a9d-4c3e-9f2a-%012d", n))}}
	for s := range upgradeSteps {
		node.ResourceVersion = fmt.Sprint(1000*n + s)
		rec.Eventf(node, nil, corev1.EventTypeNormal, "DriverUpgrade", "Upgrade",
			"step-%d-required -> step-%d-required: driver 535.154.05 -> 550.54.15, %d of 100 nodes in maintenance", s, s+1, n%100)
	}
}

// written reports whether every step recorded is written.
func (r *Recorder) written() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if len(e.pending) > 0 || e.resourceVersion == "" {
			return false
		}
	}
	return true
}

// discardingEvents is an API server that accepts every write and keeps
// nothing.
type discardingEvents struct{}

func (discardingEvents) Events(string) corev1client.EventInterface { return discardingNamespace{} }

type discardingNamespace struct{ corev1client.EventInterface }

func (discardingNamespace) Create(_ context.Context, ev *corev1.Event, _ metav1.CreateOptions) (*corev1.Event, error) {
	out := ev.DeepCopy()
	out.ResourceVersion = "1"
	return out, nil
}

func (discardingNamespace) Patch(_ context.Context, name string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Event, error) {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "2"}}, nil
}

// countingSink is client-go's events sink of an API server that accepts
// every write and keeps nothing.
type countingSink struct{ created atomic.Int64 }

func (s *countingSink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.created.Add(1)
	return ev, nil
}

func (s *countingSink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return ev, nil
}

func (s *countingSink) Patch(_ context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return ev, nil
}
