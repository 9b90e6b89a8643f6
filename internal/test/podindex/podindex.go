package podindex

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gpu-operator/gpu-operator/internal/operandpods"
)

// fixedPods lists a fixed list of pods, then watches nothing.
type fixedPods []corev1.Pod

func (f fixedPods) List(metav1.ListOptions) (runtime.Object, error) {
	return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: f}, nil
}

func (f fixedPods) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (f fixedPods) IsWatchListSemanticsUnSupported() bool { return true }

// Fixed returns a started index of pods, synced; it stops, its informer
// gone, when the test ends.
func Fixed(t testing.TB, pods ...corev1.Pod) *operandpods.Index {
	t.Helper()
	idx := operandpods.New(fixedPods(pods))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = idx.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := idx.All()
		if err == nil {
			return idx
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operand pods index did not sync: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
