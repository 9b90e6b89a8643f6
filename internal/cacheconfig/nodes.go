package cacheconfig

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeLister lists the fleet's nodes for the controllers that look at all
// of it at once: the read-only objects the cache holds.
type NodeLister interface {
	ListNodes(ctx context.Context) ([]*corev1.Node, error)
}

// CachedNodes lists the nodes of the cache's node informer as it holds
// them. A client's List, even with client.UnsafeDisableDeepCopy, copies
// each node into the NodeList's slice of values: at 5000 nodes those
// copies were 29% of the bytes the operator allocated in its rollout
// (docs/scale.md, run AK), and a node kept from a list kept the whole
// list's array alive with it.
type CachedNodes struct {
	Informers cache.Informers
}

// ListNodes returns the cache's own nodes, in no order. They are shared
// with every reader of the cache: never change one.
func (c CachedNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	// Waits, as a cached List does, until the informer has synced.
	inf, err := c.Informers.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("getting the cache's node informer: %w", err)
	}
	var store toolscache.Store
	if stored, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		store = stored.GetStore()
	}
	if store == nil {
		return nil, fmt.Errorf("the cache's node informer (%T) has no store to list", inf)
	}
	return nodesOf(store.List()), nil
}

func nodesOf(objs []any) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

// ListNodes lists the nodes with l or, where l is nil, through fallback,
// a copy of each: for readers with no informer behind them (kubectl gpu's
// live reader, tests' fakes).
func ListNodes(ctx context.Context, l NodeLister, fallback client.Reader) ([]*corev1.Node, error) {
	if l != nil {
		return l.ListNodes(ctx)
	}
	list := &corev1.NodeList{}
	if err := fallback.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
