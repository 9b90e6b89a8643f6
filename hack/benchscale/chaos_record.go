package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
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

// The chaos recorder keeps every version of the nodes, operand pods and
// ClusterPolicies the API server stored while faults ran, each with its
// resourceVersion. One etcd numbers every write of every kind in one
// sequence, so "the node as it was when this pod was created" is the
// node's last version numbered below the pod's: the invariants are
// checked on that order, after the run, not on when the watches happened
// to deliver.

// nodeVersion is a node as stored at revision rv.
type nodeVersion struct {
	rv uint64
	// seen is when the recording received it.
	seen          time.Time
	labels        map[string]string
	unschedulable bool
	gone          bool // deleted, or being deleted
}

// podEvent is an operand pod created, or starting to go, at revision rv.
type podEvent struct {
	rv      uint64
	seen    time.Time
	uid     string
	name    string
	state   string
	node    string
	created bool // else: deletion started (or the pod went at once)
}

// policyVersion says whether an active ClusterPolicy existed at rv.
type policyVersion struct {
	rv      uint64
	present bool
}

// listed marks the objects of the initial list: what existed before the
// recording started, not created under it.
const listed watch.EventType = "LISTED"

type recorder struct {
	mu       sync.Mutex
	nodes    map[string][]nodeVersion
	pods     []podEvent
	podsSeen map[string]bool // uid -> created recorded
	podsGone map[string]bool // uid -> deletion recorded
	policies []policyVersion
	// gaps counts watch restarts that could have missed versions.
	gaps int
}

func newRecorder() *recorder {
	return &recorder{nodes: map[string][]nodeVersion{}, podsSeen: map[string]bool{}, podsGone: map[string]bool{}}
}

func rvOf(o metav1.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

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

func (r *recorder) observe(t watch.EventType, obj runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.Node:
		r.nodes[o.Name] = append(r.nodes[o.Name], nodeVersion{rv: rvOf(o), seen: time.Now(), labels: o.Labels,
			unschedulable: o.Spec.Unschedulable, gone: t == watch.Deleted || o.DeletionTimestamp != nil})
	case *corev1.Pod:
		uid := string(o.UID)
		e := podEvent{rv: rvOf(o), seen: time.Now(), uid: uid, name: o.Name, state: o.Labels[render.LabelState], node: targetNode(o)}
		if !r.podsSeen[uid] && t != watch.Deleted && o.DeletionTimestamp == nil {
			r.podsSeen[uid] = true
			e.created = true
			// A pod that existed before the recording started was not
			// created under it.
			if t == watch.Added {
				r.pods = append(r.pods, e)
			}
			return
		}
		if !r.podsGone[uid] && (t == watch.Deleted || o.DeletionTimestamp != nil) {
			r.podsGone[uid] = true
			r.pods = append(r.pods, e)
		}
	case *gpuv1.ClusterPolicy:
		present := t != watch.Deleted && o.DeletionTimestamp == nil
		r.policies = append(r.policies, policyVersion{rv: rvOf(o), present: present})
	}
}

// watchGaps is how many times the recording listed again.
func (r *recorder) watchGaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}

// targetNode is the node a pod is for: its binding, or, before the
// scheduler bound it, the node its DaemonSet's affinity names.
func targetNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// nodeAt returns the node as it was just before revision rv.
func (r *recorder) nodeAt(name string, rv uint64) (nodeVersion, bool) {
	versions := r.nodes[name]
	i := sort.Search(len(versions), func(i int) bool { return versions[i].rv >= rv })
	if i == 0 {
		return nodeVersion{}, false
	}
	return versions[i-1], true
}

// leftReadyAt returns when, before revision rv, a node's state label last
// left ready, as the recording saw it; false if it never was ready
// before rv.
func (r *recorder) leftReadyAt(name, label string, rv uint64) (time.Time, bool) {
	var left time.Time
	wasReady := false
	for _, v := range r.nodes[name] {
		if v.rv >= rv {
			break
		}
		ready := v.labels[label] == string(gpuv1.StateReady)
		if wasReady && !ready {
			left = v.seen
		}
		wasReady = ready
	}
	return left, !left.IsZero()
}

// policyAt reports whether an active ClusterPolicy existed just before rv.
func (r *recorder) policyAt(rv uint64) bool {
	present := false
	for _, p := range r.policies {
		if p.rv >= rv {
			break
		}
		present = p.present
	}
	return present
}

// sortAll orders every history by revision; the watches deliver each kind
// in order, but the initial lists and restarts may not.
func (r *recorder) sortAll() {
	for _, v := range r.nodes {
		sort.SliceStable(v, func(i, j int) bool { return v[i].rv < v[j].rv })
	}
	sort.SliceStable(r.pods, func(i, j int) bool { return r.pods[i].rv < r.pods[j].rv })
	sort.SliceStable(r.policies, func(i, j int) bool { return r.policies[i].rv < r.policies[j].rv })
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

// upgradeState is a node version's driver upgrade state.
func (v nodeVersion) upgradeState() gpuv1.UpgradeState {
	return gpuv1.UpgradeState(v.labels[gpuv1.LabelUpgradeState])
}
