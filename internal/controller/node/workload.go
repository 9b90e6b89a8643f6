package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// DefaultWorkloadProofs is how many CUDA workload pods run at once across
// the cluster by default: each pulls the validator image on its node the
// first time, and a fleet proved at once would pull it everywhere at once.
const DefaultWorkloadProofs = 32

// workloadStarts bounds the CUDA workload pods running at once. The index
// shows a pod only after its create comes back through the watch: the
// pods this process made and the index has not shown yet count too, for
// a minute at most (a pod deleted before it was seen frees its place).
type workloadStarts struct {
	mu      sync.Mutex
	unseen  map[string]time.Time
	timeout time.Duration
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
		case p.Name == name || !ended(p):
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
	if current == nil {
		placed, err := r.workloads.reserve(func() ([]*operandpods.Pod, error) { return r.Pods.OfState(state.CUDAWorkload) },
			name, r.workloadLimit(), r.now())
		if err != nil || !placed {
			return !placed && err == nil, err
		}
		if err := r.Client.Create(ctx, cudaworkload.Pod(cp, r.Namespace, node, *req)); err != nil {
			r.workloads.release(name)
			if apierrors.IsAlreadyExists(err) {
				// The index does not show it: a person took the operator's
				// labels off it. It goes, and the next look makes it again.
				return true, client.IgnoreNotFound(r.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace}}))
			}
			// A quota or an admission policy in the namespace: the node's
			// state says it is starting, the event says why not.
			r.Recorder.Eventf(n, nil, corev1.EventTypeWarning, "WorkloadRefused", "Reconcile",
				"the CUDA workload pod %s could not be created: %v", name, err)
			return false, err
		}
	}
	for _, p := range all {
		if p.Node == node && p.Name != name && p.DeletionTimestamp == nil && ended(p) {
			if err := r.deleteWorkloadPod(ctx, p); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

func ended(p *operandpods.Pod) bool {
	return p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed
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
// that no place is counted twice or not at all) that have not ended, and
// those reserved here that the index does not show yet. A pod not made
// after all gives its place back (release).
func (s *workloadStarts) reserve(list func() ([]*operandpods.Pod, error), name string, limit int, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pods, err := list()
	if err != nil {
		return false, err
	}
	if s.unseen == nil {
		s.unseen = map[string]time.Time{}
	}
	timeout := s.timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	running := 0
	for _, p := range pods {
		delete(s.unseen, p.Name)
		if p.DeletionTimestamp == nil && !ended(p) {
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
		return false, nil
	}
	s.unseen[name] = now
	return true, nil
}

// release gives back the place of a pod that was not made.
func (s *workloadStarts) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unseen, name)
}
