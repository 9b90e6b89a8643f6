package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// DefaultWorkloadProofs is how many CUDA workload pods run at once across
// the cluster by default: each pulls the validator image on its node the
// first time, and a fleet proved at once would pull it everywhere at once
// (as a DaemonSet's rollout does). At 1000 simulated nodes a bound of 32
// made the rollout 27 s longer than none (docs/scale.md, run AA); 100
// keeps a registry's load to a rollout's of 100 nodes.
const DefaultWorkloadProofs = 100

// workloadStarts bounds the CUDA workload pods running at once. The index
// shows a pod only after its create comes back through the watch: the
// pods this process made and the index has not shown yet count too, for
// a minute at most (a pod deleted before it was seen frees its place).
type workloadStarts struct {
	mu      sync.Mutex
	unseen  map[string]time.Time
	timeout time.Duration
	// waiting are the nodes that found no place, oldest first: a proof
	// that ends wakes the next of them (wakeNext), sooner than their
	// poll (timers.WorkloadSlotPoll), which stays as the backstop.
	waiting []string
}

// startWorkload makes the node's pod the decision asks for when a place is
// free, and deletes the node's other CUDA workload pods: those that have
// not ended at once (they are superseded, and would hold a place and a
// GPU), the ended ones once the new pod exists (the newest is the
// record). It reports whether the node must look again soon: no place was
// free, or a pod of the wanted name was in the way.
func (r *Reconciler) startWorkload(ctx context.Context, cp *gpuv1.ClusterPolicy, n *corev1.Node, req *cudaworkload.Request) (again bool, err error) {
	node := n.Name
	name := cudaworkload.PodName(node, *req)
	all, err := r.Pods.OfState(state.CUDAWorkload)
	if err != nil {
		return false, err
	}
	var current *operandpods.Pod
	for _, p := range all {
		switch {
		case p.Node != node || p.DeletionTimestamp != nil:
		case p.Name == name && p.Annotation(cudaworkload.AnnotationGeneration) == req.Generation:
			current = p
		case p.Name == name || !p.Ended():
			// Superseded, or of the wanted name but not of its generation
			// (a person edited it): it goes first.
			if err := r.deleteWorkloadPod(ctx, p); err != nil {
				return false, err
			}
			again = again || p.Name == name
		}
	}
	if again {
		return true, nil
	}
	if current != nil {
		r.workloads.seen(name)
	}
	if current == nil {
		if r.workloads.made(name, r.now()) {
			// Made here, and not in the index yet: its watch event wakes
			// the node.
			return false, nil
		}
		placed, err := r.workloads.reserve(func() ([]*operandpods.Pod, error) { return r.Pods.OfState(state.CUDAWorkload) },
			node, name, r.workloadLimit(), r.now())
		if err != nil || !placed {
			return !placed && err == nil, err
		}
		if err := r.Client.Create(ctx, cudaworkload.Pod(cp, r.Namespace, node, *req)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return r.hiddenWorkloadPod(ctx, name)
			}
			r.workloads.release(name)
			// A quota or an admission policy in the namespace: the node's
			// state says it is starting, the event says why not.
			r.Recorder.Eventf(n, nil, corev1.EventTypeWarning, "WorkloadRefused", "Reconcile",
				"the CUDA workload pod %s could not be created: %v", name, err)
			return false, err
		}
	}
	for _, p := range all {
		if p.Node == node && p.Name != name && p.DeletionTimestamp == nil && p.Ended() {
			if err := r.deleteWorkloadPod(ctx, p); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// hiddenWorkloadPod handles a pod of the wanted name that exists and the
// index does not show: one whose operator labels a person took off, which
// goes (the next look makes it again), or one the index has not shown yet,
// which keeps its reserved place until it does. Pods are read live.
func (r *Reconciler) hiddenWorkloadPod(ctx context.Context, name string) (again bool, err error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, pod); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	if pod.Labels[render.LabelManagedBy] == render.ManagedBy && pod.Labels[render.LabelState] == string(state.CUDAWorkload) {
		return false, nil
	}
	r.workloads.release(name)
	return true, client.IgnoreNotFound(r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}))
}

func (r *Reconciler) deleteWorkloadPod(ctx context.Context, p *operandpods.Pod) error {
	err := r.Client.Delete(ctx, p.Ref(), client.Preconditions{UID: &p.UID})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting the CUDA workload pod %s: %w", p.Name, err)
	}
	return nil
}

func (r *Reconciler) workloadLimit() int {
	if r.WorkloadProofs > 0 {
		return r.WorkloadProofs
	}
	return DefaultWorkloadProofs
}

// reserve takes a place for the pod name when fewer than limit CUDA
// workload pods run: those of the index (list, read under the lock, so
// that no place is counted twice or not at all) bound to their node that
// have not ended, and those reserved here that the index does not show
// yet. A pod waiting for the scheduler (on a DRA node) pulls nothing and
// holds no GPU: it may wait for long, and holds no place meanwhile. A pod not made
// after all gives its place back (release).
func (s *workloadStarts) reserve(list func() ([]*operandpods.Pod, error), node, name string, limit int, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pods, err := list()
	if err != nil {
		return false, err
	}
	if s.unseen == nil {
		s.unseen = map[string]time.Time{}
	}
	timeout := s.timeoutOrDefault()
	running := 0
	for _, p := range pods {
		delete(s.unseen, p.Name)
		if p.DeletionTimestamp == nil && !p.Ended() && p.Unscheduled == "" {
			running++
		}
	}
	for n, at := range s.unseen {
		if now.Sub(at) >= timeout {
			delete(s.unseen, n)
			continue
		}
		running++
	}
	if running >= limit {
		if !slices.Contains(s.waiting, node) {
			s.waiting = append(s.waiting, node)
		}
		return false, nil
	}
	s.waiting = slices.DeleteFunc(s.waiting, func(n string) bool { return n == node })
	s.unseen[name] = now
	return true, nil
}

// wakeNext returns the node that has waited longest for a place, and
// takes it off the queue: it looks again, and queues again if the place
// went to another. None when no node waits.
func (s *workloadStarts) wakeNext() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) == 0 {
		return "", false
	}
	next := s.waiting[0]
	s.waiting = s.waiting[1:]
	return next, true
}

// made reports whether this process made the pod name and the index has
// not shown it yet: a look on a cache that lags must not take it for
// missing and make it again.
func (s *workloadStarts) made(name string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.unseen[name]
	return ok && now.Sub(at) < s.timeoutOrDefault()
}

// seen forgets a pod made here once the index shows it.
func (s *workloadStarts) seen(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unseen, name)
}

func (s *workloadStarts) timeoutOrDefault() time.Duration {
	if s.timeout == 0 {
		return time.Minute
	}
	return s.timeout
}

// release gives back the place of a pod that was not made.
func (s *workloadStarts) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unseen, name)
}
