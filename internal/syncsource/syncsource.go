package syncsource

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// New is a controller's watch of informer: h receives the informer's
// stored objects, and WaitForSync waits for its first list. what names
// the objects in the error of a wait that ends first.
func New(informer toolscache.SharedIndexInformer, what string, h handler.EventHandler, predicates ...predicate.Predicate) source.SyncingSource {
	return &syncingSource{
		informer: &source.Informer{Informer: informer, Handler: h, Predicates: predicates},
		synced:   informer.HasSynced,
		what:     what,
	}
}

type syncingSource struct {
	informer source.Source
	synced   toolscache.InformerSynced
	what     string
}

func (s *syncingSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.informer.Start(ctx, q)
}

func (s *syncingSource) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("waiting for %s to be listed: %w", s.what, context.Cause(ctx))
	}
	return nil
}

func (s *syncingSource) String() string { return s.what }
