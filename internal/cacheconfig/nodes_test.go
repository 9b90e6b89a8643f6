package cacheconfig

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// nodeInformer is a cache whose node informer is a client-go one, as the
// manager's is; nothing runs it: the test fills its store.
type nodeInformer struct {
	cache.Informers
	informer toolscache.SharedIndexInformer
}

func (n nodeInformer) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return n.informer, nil
}

func TestCachedNodesAreTheCachesOwn(t *testing.T) {
	g := NewWithT(t)
	informer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Node{}, 0, toolscache.Indexers{})
	held := map[string]*corev1.Node{}
	for _, name := range []string{"a", "b", "c"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		held[name] = n
		g.Expect(informer.GetStore().Add(n)).To(Succeed())
	}
	nodes, err := CachedNodes{Informers: nodeInformer{informer: informer}}.ListNodes(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes).To(HaveLen(3))
	for _, n := range nodes {
		g.Expect(n).To(BeIdenticalTo(held[n.Name]), "the store's object, not a copy of it")
	}
}

func TestCachedNodesSayWhenTheInformerHasNoStore(t *testing.T) {
	g := NewWithT(t)
	_, err := CachedNodes{Informers: &informertest.FakeInformers{}}.ListNodes(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring("has no store to list")))
}

func TestListNodesFallsBackToTheReader(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}).Build()
	nodes, err := ListNodes(context.Background(), nil, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes).To(HaveExactElements(HaveField("Name", "a")))
}
