package maintenance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cachedNodes hands out nodes as the cache's informer does
// (cacheconfig.CachedNodes): the same object at every list until the node
// changes. It keeps a copy of each as it handed it out, so that a test can
// tell that no look changed one: the cache's objects are every reader's.
type cachedNodes struct {
	reader client.Reader
	held   map[string]*corev1.Node
	as     map[*corev1.Node]*corev1.Node
}

func newCachedNodes(reader client.Reader) *cachedNodes {
	return &cachedNodes{reader: reader, held: map[string]*corev1.Node{}, as: map[*corev1.Node]*corev1.Node{}}
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
		} else {
			c.as[n] = n.DeepCopy()
		}
		held[n.Name], out[i] = n, n
	}
	c.held = held
	return out, nil
}

// untouched says which node handed out differs from what it was.
func (c *cachedNodes) untouched() error {
	for n, was := range c.as {
		if !equality.Semantic.DeepEqual(n, was) {
			return fmt.Errorf("node %s, listed at version %s, was changed in place by a reader", was.Name, was.ResourceVersion)
		}
	}
	return nil
}
