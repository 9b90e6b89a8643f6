package draslices

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// fakeLister serves a list that waits for release, then watch events.
type fakeLister struct {
	items   []resourcev1.ResourceSlice
	release chan struct{}
	watcher *watch.FakeWatcher
}

func (f *fakeLister) List(metav1.ListOptions) (kruntime.Object, error) {
	<-f.release
	return &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: f.items}, nil
}

func (f *fakeLister) Watch(metav1.ListOptions) (watch.Interface, error) { return f.watcher, nil }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (f *fakeLister) IsWatchListSemanticsUnSupported() bool { return true }

func resourceSlice(name, node, driver string, gpus ...string) resourcev1.ResourceSlice {
	rs := resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for _, uuid := range gpus {
		rs.Spec.Devices = append(rs.Spec.Devices, resourcev1.Device{Name: "gpu-" + uuid,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				// The driver's own attributes, written short and
				// qualified: the API accepts both.
				"type":                {StringValue: ptr.To(TypeGPU)},
				"gpu.nvidia.com/uuid": {StringValue: ptr.To(uuid)},
			}})
	}
	return rs
}

// The index answers only once listed, then follows the watch: a node's
// summary holds the NVIDIA driver's slices of that node alone.
func TestIndexFollowsTheSlices(t *testing.T) {
	g := NewWithT(t)
	f := &fakeLister{release: make(chan struct{}), watcher: watch.NewFake(), items: []resourcev1.ResourceSlice{
		resourceSlice("a-gpus", "node-a", GPUDriver, "A0", "A1"),
		resourceSlice("b-gpus", "node-b", GPUDriver, "B0"),
		resourceSlice("a-nics", "node-a", "nic.example.com"),
	}}
	idx := New(f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = idx.Start(ctx) }()

	_, err := idx.OnNode("node-a")
	g.Expect(err).To(MatchError(ErrNotSynced), "before the list, no answer: an empty one would read as no slices")
	close(f.release)
	g.Eventually(func() error { _, err := idx.OnNode("node-a"); return err }).WithTimeout(10 * time.Second).Should(Succeed())

	a, _ := idx.OnNode("node-a")
	g.Expect(a.GPUs).To(Equal(2))
	g.Expect(a.Slices).To(Equal(1), "the NIC driver's slice is not ours")
	g.Expect(a.Complete()).To(BeTrue())

	cd := resourceSlice("a-cd", "node-a", ComputeDomainDriver)
	f.watcher.Add(&cd)
	g.Eventually(func() int { n, _ := idx.OnNode("node-a"); return n.Slices }).Should(Equal(2))
	gpus := resourceSlice("a-gpus", "node-a", GPUDriver, "A0", "A1")
	f.watcher.Delete(&gpus)
	f.watcher.Delete(&cd)
	g.Eventually(func() int { n, _ := idx.OnNode("node-a"); return n.Slices }).Should(Equal(0))
	b, _ := idx.OnNode("node-b")
	g.Expect(b.GPUs).To(Equal(1))
}

// A controller watching the index is told of a slice as an object it can
// map to the slice's node.
func TestSourceEnqueuesTheSlicesNode(t *testing.T) {
	g := NewWithT(t)
	f := &fakeLister{release: make(chan struct{}), watcher: watch.NewFake(),
		items: []resourcev1.ResourceSlice{resourceSlice("a-gpus", "node-a", GPUDriver, "A0")}}
	close(f.release)
	idx := New(f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = idx.Start(ctx) }()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	toNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		s, ok := o.(*Slice)
		if !ok || s.Node == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: s.Node}}}
	})
	src := idx.Source(toNode)
	g.Expect(src.Start(ctx, q)).To(Succeed())
	g.Expect(src.WaitForSync(ctx)).To(Succeed())
	g.Eventually(q.Len).Should(Equal(1))
	req, _ := q.Get()
	g.Expect(req.Name).To(Equal("node-a"))
}
