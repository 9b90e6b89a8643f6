//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The order checks compare revisions, not times. The simulated cluster's
// API server keeps every object in one etcd, whose revision counts every
// write to any object: a pod created at a higher revision than a node's
// label write was created after it. Times would not do: the API's have
// whole seconds, and a watch delivers a write up to a second later on a
// loaded machine, which once made a proof pod created after its device
// plugin's ready label look a second older than the label (CI, stop 61).

// revision is the etcd revision of an object as a watch delivered it;
// false for a resourceVersion that is not one (which the checks then
// find missing, rather than taking it for zero).
func revision(o client.Object) (int64, bool) {
	r, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	return r, err == nil && r > 0
}

// podCreations records the revision each pod of the operator's namespace
// was created at: the revision its ADDED event carries, the watch being
// open before the chart is installed.
type podCreations struct {
	mu  sync.Mutex
	rev map[types.UID]int64
}

func watchPodCreations(ctx context.Context, c client.WithWatch) *podCreations {
	p := &podCreations{rev: map[types.UID]int64{}}
	follow(ctx, c, &corev1.PodList{}, func(t watch.EventType, o client.Object) {
		if t != watch.Added {
			return
		}
		if r, ok := revision(o); ok {
			p.mu.Lock()
			p.rev[o.GetUID()] = r
			p.mu.Unlock()
		}
	}, client.InNamespace("gpu-operator"))
	return p
}

// of returns the revision the pod was created at, once the watch has
// delivered its creation.
func (p *podCreations) of(pod *corev1.Pod) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.rev[pod.UID]
	return r, ok
}

// newer reports whether pod a was created after pod b: by revision where
// the watch delivered both creations, else by creation time (whole
// seconds, which two pods of one second share).
func (p *podCreations) newer(a, b *corev1.Pod) bool {
	ra, okA := p.of(a)
	rb, okB := p.of(b)
	if okA && okB {
		return ra > rb
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}
