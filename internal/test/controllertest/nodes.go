package controllertest

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
)

// listedNodes is the operator's fleet lister (cacheconfig.CachedNodes over
// the running manager's cache) with a copy kept of every node it handed
// out: the objects are the cache's, every reader's, and a controller that
// changed one in place would change what the others read. untouched says
// whether any was, over the whole suite and every restart of the operator.
type listedNodes struct {
	mu    sync.Mutex
	inner cacheconfig.NodeLister
	as    map[*corev1.Node]*corev1.Node
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.as == nil {
		l.as = map[*corev1.Node]*corev1.Node{}
	}
	for _, n := range nodes {
		if _, ok := l.as[n]; !ok {
			l.as[n] = n.DeepCopy()
		}
	}
	return nodes, nil
}

func (l *listedNodes) untouched() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, was := range l.as {
		if !equality.Semantic.DeepEqual(n, was) {
			return fmt.Errorf("node %s, listed from the cache at version %s, was changed in place by a controller",
				was.Name, was.ResourceVersion)
		}
	}
	return nil
}
