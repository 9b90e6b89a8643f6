package controllertest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// listedNodes is the operator's fleet lister (cacheconfig.CachedNodes over
// the running manager's cache) with a copy kept of every node it handed
// out: the objects are the cache's, every reader's, and a controller that
// changed one in place would change what the others read. copies tell
// whether any was, over the whole suite and every restart of the operator.
type listedNodes struct {
	mu     sync.Mutex
	inner  cacheconfig.NodeLister
	copies fixture.NodeCopies
}

func (l *listedNodes) use(inner cacheconfig.NodeLister) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inner = inner
}

func (l *listedNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	l.mu.Lock()
	inner := l.inner
	l.mu.Unlock()
	nodes, err := inner.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	l.copies.Keep(nodes)
	return nodes, nil
}
