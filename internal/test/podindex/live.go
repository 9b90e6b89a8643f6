package podindex

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gpu-operator/gpu-operator/internal/operandpods"
)

// Live is an operand pods index a test changes pod by pod, as an informer
// sees an API server's changes: a changed pod gets a new summary, the
// others keep theirs.
type Live struct {
	*operandpods.Index
	t       testing.TB
	watcher *watch.FakeWatcher
	mu      sync.Mutex
	version int
	pods    []corev1.Pod
}

func (l *Live) List(metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(l.version)}, Items: l.pods}, nil
}

func (l *Live) Watch(metav1.ListOptions) (watch.Interface, error) { return l.watcher, nil }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (l *Live) IsWatchListSemanticsUnSupported() bool { return true }

// NewLive returns a started index of pods, synced; it stops when the test
// ends.
func NewLive(t testing.TB, pods ...corev1.Pod) *Live {
	t.Helper()
	l := &Live{t: t, watcher: watch.NewFakeWithChanSize(16, false), version: 1}
	for i := range pods {
		pods[i].ResourceVersion = "1"
	}
	l.pods = pods
	l.Index = operandpods.New(l)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = l.Index.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	l.await(func() bool { _, err := l.All(); return err == nil })
	return l
}

// Put adds or changes a pod, and returns once the index has it.
func (l *Live) Put(pod *corev1.Pod) {
	l.t.Helper()
	pod = l.versioned(pod)
	l.watcher.Modify(pod)
	l.await(func() bool { return l.holds(pod) })
}

// Delete removes a pod, and returns once the index no longer has it.
func (l *Live) Delete(pod *corev1.Pod) {
	l.t.Helper()
	pod = l.versioned(pod)
	l.watcher.Delete(pod)
	l.await(func() bool { return !l.has(pod.Namespace, pod.Name) })
}

// versioned is a copy of pod at the next resourceVersion, as the API
// server gives each change.
func (l *Live) versioned(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	pod.ResourceVersion = strconv.Itoa(l.version)
	return pod
}

func (l *Live) holds(pod *corev1.Pod) bool {
	all, err := l.All()
	if err != nil {
		return false
	}
	for _, p := range all {
		if p.Namespace == pod.Namespace && p.Name == pod.Name && p.ResourceVersion == pod.ResourceVersion {
			return true
		}
	}
	return false
}

func (l *Live) has(namespace, name string) bool {
	all, err := l.All()
	if err != nil {
		return true
	}
	for _, p := range all {
		if p.Namespace == namespace && p.Name == name {
			return true
		}
	}
	return false
}

// await polls the index, which an informer fills on its own goroutine.
func (l *Live) await(done func() bool) {
	l.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			l.t.Fatal("the operand pods index did not take the change")
		}
		time.Sleep(time.Millisecond)
	}
}
