//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// record starts the watches; they stop with ctx.
func (r *recorder) record(ctx context.Context, cs kubernetes.Interface, c client.WithWatch) error {
	nodes := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) { return cs.CoreV1().Nodes().List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	pods := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = render.LabelState
			return cs.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = render.LabelState
			return cs.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
	policies := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			list := &gpuv1.ClusterPolicyList{}
			err := c.List(ctx, list, &client.ListOptions{Raw: &o})
			return list, err
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &gpuv1.ClusterPolicyList{}, &client.ListOptions{Raw: &o})
		},
	}
	for _, lw := range []*cache.ListWatch{nodes, pods, policies} {
		if err := r.follow(ctx, lw); err != nil {
			return err
		}
	}
	return nil
}

// follow lists, then watches from the list's revision, resuming after
// API server and etcd restarts without losing a version. A restarted API
// server may have forgotten the revision the watch resumes from (410
// Gone): then it lists again, and counts the gap, in which versions may
// have been missed.
func (r *recorder) follow(ctx context.Context, lw *cache.ListWatch) error {
	w, err := r.listAndWatch(ctx, lw)
	if err != nil {
		return err
	}
	go func() {
		for {
			r.drain(ctx, w)
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.gaps++
			r.mu.Unlock()
			for w, err = r.listAndWatch(ctx, lw); err != nil && ctx.Err() == nil; w, err = r.listAndWatch(ctx, lw) {
				time.Sleep(time.Second)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return nil
}

func (r *recorder) listAndWatch(ctx context.Context, lw *cache.ListWatch) (*watchtools.RetryWatcher, error) {
	list, err := lw.List(metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items, err := meta(list)
	if err != nil {
		return nil, err
	}
	for _, o := range items {
		r.observe(listed, o)
	}
	if pods, ok := list.(*corev1.PodList); ok {
		rv, _ := strconv.ParseUint(pods.ResourceVersion, 10, 64)
		r.relisted(pods, rv)
	}
	return watchtools.NewRetryWatcherWithContext(ctx, listRV(list), lw)
}

// drain records the watch's events until it ends.
func (r *recorder) drain(ctx context.Context, w *watchtools.RetryWatcher) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			r.observe(ev.Type, ev.Object)
		}
	}
}

func meta(list runtime.Object) ([]runtime.Object, error) {
	switch l := list.(type) {
	case *corev1.NodeList:
		out := make([]runtime.Object, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	case *corev1.PodList:
		out := make([]runtime.Object, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	case *gpuv1.ClusterPolicyList:
		out := make([]runtime.Object, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected list %T", list)
}

func listRV(list runtime.Object) string {
	if l, ok := list.(metav1.ListInterface); ok {
		return l.GetResourceVersion()
	}
	return ""
}
