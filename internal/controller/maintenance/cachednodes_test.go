package maintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// cachedNodes hands out nodes as the cache's informer does
// (cacheconfig.CachedNodes): the same object at every list until the node
// changes. Its copies tell whether a look changed one: the cache's objects
// are every reader's.
type cachedNodes struct {
	reader client.Reader
	held   map[string]*corev1.Node
	copies fixture.NodeCopies
}

func newCachedNodes(reader client.Reader) *cachedNodes {
	return &cachedNodes{reader: reader, held: map[string]*corev1.Node{}}
}

func (c *cachedNodes) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := c.reader.List(ctx, list); err != nil {
		return nil, err
	}
	held := make(map[string]*corev1.Node, len(list.Items))
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		if last := c.held[n.Name]; last != nil && last.UID == n.UID && last.ResourceVersion == n.ResourceVersion {
			n = last
		}
		held[n.Name], out[i] = n, n
	}
	c.held = held
	c.copies.Keep(out)
	return out, nil
}
