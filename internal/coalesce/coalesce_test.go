package coalesce

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestABurstOfEventsIsOneRequestAfterTheDelay(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	fleet := reconcile.Request{NamespacedName: types.NamespacedName{Name: "fleet"}}
	h := After(200*time.Millisecond, func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleet}
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	ctx := context.Background()
	for range 100 {
		h.Update(ctx, event.UpdateEvent{ObjectOld: pod, ObjectNew: pod}, q)
	}
	h.Create(ctx, event.CreateEvent{Object: pod}, q)
	h.Delete(ctx, event.DeleteEvent{Object: pod}, q)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d requests queued at once, want none before the delay", n)
	}
	for deadline := time.Now().Add(10 * time.Second); q.Len() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // time for a second entry, if there were one
	if n := q.Len(); n != 1 {
		t.Fatalf("%d requests queued after the delay, want 1", n)
	}
	if got, _ := q.Get(); got != fleet {
		t.Errorf("queued %v, want %v", got, fleet)
	}
}

// An urgent event enqueues after the quick delay, and brings forward a
// batch already waiting; others wait for the batch.
func TestSplitSendsUrgentEventsAhead(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	fleet := reconcile.Request{NamespacedName: types.NamespacedName{Name: "fleet"}}
	urgent := func(_ context.Context, o client.Object) bool { return o.GetLabels()["step"] == "active" }
	h := Split(time.Hour, func() time.Duration { return 20 * time.Millisecond }, urgent,
		func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{fleet} })
	ctx := context.Background()
	idle := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	active := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"step": "active"}}}

	h.Update(ctx, event.UpdateEvent{ObjectOld: idle, ObjectNew: idle}, q)
	time.Sleep(100 * time.Millisecond)
	if n := q.Len(); n != 0 {
		t.Fatalf("an ordinary event was queued before the batch delay")
	}
	// The node just left its step: the old object was active.
	h.Update(ctx, event.UpdateEvent{ObjectOld: active, ObjectNew: idle}, q)
	for deadline := time.Now().Add(5 * time.Second); q.Len() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("%d requests queued after the urgent event, want the one", n)
	}
}
