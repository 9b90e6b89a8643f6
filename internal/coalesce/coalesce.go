package coalesce

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// After returns an event handler that enqueues what mapFn returns for the
// event's object, delay later. Requests for one key waiting at the same time
// are one: the work queue keeps a single entry per key, at the earliest
// time asked for, so a key is reconciled at most about once per delay
// however many events arrive.
func After(delay time.Duration, mapFn handler.MapFunc) handler.EventHandler {
	return Split(delay, nil, nil, mapFn)
}

// Split is After, except that an event urgent reports (for an update, on
// the old or the new object) enqueues after quick() instead: an event some
// waiting work is held on goes ahead of the batch. The work queue keeps
// the earliest time asked for, so an urgent event also brings forward a
// batch already waiting. urgent and quick may be nil: then nothing is.
func Split(delay time.Duration, quick func() time.Duration, urgent func(context.Context, client.Object) bool,
	mapFn handler.MapFunc) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, others ...client.Object) {
		after := delay
		if urgent != nil && quick != nil {
			for _, o := range append([]client.Object{obj}, others...) {
				if urgent(ctx, o) {
					after = min(delay, quick())
					break
				}
			}
		}
		for _, req := range mapFn(ctx, obj) {
			q.AddAfter(req, after)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectNew, e.ObjectOld)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}
