package operandpods

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/heap"
)

// fakeLister serves a list that waits for release, then watch events.
type fakeLister struct {
	items   []corev1.Pod
	release chan struct{}
	watcher *watch.FakeWatcher
}

func (f *fakeLister) List(metav1.ListOptions) (kruntime.Object, error) {
	<-f.release
	return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: f.items}, nil
}

func (f *fakeLister) Watch(metav1.ListOptions) (watch.Interface, error) { return f.watcher, nil }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch:
// the fake serves no initial-events stream.
func (f *fakeLister) IsWatchListSemanticsUnSupported() bool { return true }

func operandPod(name, node string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator", UID: types.UID("uid-" + name),
			ResourceVersion: "1", Labels: map[string]string{render.LabelState: "driver", render.LabelManagedBy: render.ManagedBy}},
		Spec: corev1.PodSpec{NodeName: node},
	}
}

func startIndex(t *testing.T, f *fakeLister) (*Index, context.Context) {
	t.Helper()
	idx := New(f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = idx.Start(ctx) }()
	return idx, ctx
}

func TestIndexAnswersOnlyOnceListed(t *testing.T) {
	g := NewWithT(t)
	f := &fakeLister{items: []corev1.Pod{operandPod("a", "gpu-1"), operandPod("b", "gpu-2"), operandPod("c", "gpu-1")},
		release: make(chan struct{}), watcher: watch.NewFake()}
	idx, ctx := startIndex(t, f)

	_, err := idx.OnNode("gpu-1")
	g.Expect(err).To(MatchError(ErrNotSynced), "no pods yet must not read as no pods")
	_, err = idx.All()
	g.Expect(err).To(MatchError(ErrNotSynced))
	src := idx.Source(&handler.EnqueueRequestForObject{})
	waitCtx, cancelWait := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelWait()
	g.Expect(src.WaitForSync(waitCtx)).To(MatchError(ContainSubstring("waiting for operand pods to be listed")))

	close(f.release)
	g.Expect(src.WaitForSync(ctx)).To(Succeed())
	names := func(node string) []string {
		pods, err := idx.OnNode(node)
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	g.Expect(names("gpu-1")).To(ConsistOf("a", "c"))
	g.Expect(names("gpu-3")).To(BeEmpty())

	moved := operandPod("c", "gpu-3")
	moved.ResourceVersion = "2"
	f.watcher.Modify(&moved)
	g.Eventually(func() []string { return names("gpu-3") }).Should(ConsistOf("c"))
	g.Expect(names("gpu-1")).To(ConsistOf("a"))
	f.watcher.Delete(&moved)
	g.Eventually(func() []string { return names("gpu-3") }).Should(BeEmpty())
	all, err := idx.All()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(2))
	g.Expect(all[0]).To(BeAssignableToTypeOf(&Pod{}), "the cache holds summaries, not Pods")
}

func TestSourceHandsSummariesToTheHandler(t *testing.T) {
	g := NewWithT(t)
	f := &fakeLister{items: []corev1.Pod{operandPod("a", "gpu-1")}, release: make(chan struct{}), watcher: watch.NewFake()}
	close(f.release)
	idx, ctx := startIndex(t, f)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	toNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		p, ok := o.(*Pod)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p.Node}}}
	})
	src := idx.Source(toNode)
	g.Expect(src.Start(ctx, q)).To(Succeed())
	g.Expect(src.WaitForSync(ctx)).To(Succeed())
	g.Eventually(q.Len).Should(Equal(1))
	req, _ := q.Get()
	g.Expect(req.Name).To(Equal("gpu-1"))
}

// BenchmarkCacheBytesPerPod prints what the index keeps per operand pod
// decoded from the API server's answer, next to what keeping the decoded
// Pod costs: the figure behind keeping summaries.
func BenchmarkCacheBytesPerPod(b *testing.B) {
	const n = 10000
	raw := make([][]byte, n)
	for i := range raw {
		var err error
		if raw[i], err = json.Marshal(realisticPod(i)); err != nil {
			b.Fatal(err)
		}
	}
	decode := func(i int) *corev1.Pod {
		p := &corev1.Pod{}
		if err := json.Unmarshal(raw[i], p); err != nil {
			b.Fatal(err)
		}
		return p
	}
	for b.Loop() {
		b.ReportMetric(float64(heap.RetainedPer(n, func(i int) any { return Summarize(decode(i)) })), "summary-B/pod")
		b.ReportMetric(float64(heap.RetainedPer(n, func(i int) any { return decode(i) })), "pod-B/pod")
	}
}

// realisticPod is an operand pod as the API server returns it: the
// driver's, with its init containers done and its container running.
func realisticPod(i int) *corev1.Pod {
	ts := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nvidia-driver-daemonset-%05d", i), Namespace: "gpu-operator",
			UID: "2f1c6a4e-8d0b-4c1e-9f57-0a3b5c7d9e1f", ResourceVersion: "123456", CreationTimestamp: ts,
			Labels: map[string]string{render.LabelState: "driver", render.LabelManagedBy: render.ManagedBy,
				"app.kubernetes.io/name": "nvidia-driver", "controller-revision-hash": "7d9f8c6b5", "pod-template-generation": "1"},
			Annotations: map[string]string{render.AnnotationTemplateHash: "5f9c2b7a1d3e"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-driver-daemonset",
				UID: "a1b2c3d4-e5f6-4a5b-8c9d-0e1f2a3b4c5d", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("gpu-%05d", i)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ts}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "host-driver-check", Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: ts, FinishedAt: ts}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "nvidia-driver", Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}}}}},
	}
}
