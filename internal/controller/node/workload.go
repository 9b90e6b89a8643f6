package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// startWorkload makes the node's pod the decision asks for when a place is free,
// and deletes the node's older CUDA workload pods once it exists: the
// newest pod is the record. It reports whether the node must wait for a
// place.
func (r *Reconciler) startWorkload(ctx context.Context, cp *gpuv1.ClusterPolicy, n *corev1.Node, req *cudaworkload.Request) (wait bool, err error) {
	node := n.Name
	name := cudaworkload.PodName(node, *req)
	all, err := r.Pods.OfState(state.CUDAWorkload)
	if err != nil {
		return false, err
	}
	exists := false
	for _, p := range all {
		exists = exists || (p.Name == name && p.Node == node)
	}
	if !exists {
		placed, err := r.workloads.place(all, name, r.workloadLimit(), r.now(), func() error {
			err := r.Client.Create(ctx, cudaworkload.Pod(cp, r.Namespace, node, *req))
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			if err != nil {
				// A quota or an admission policy in the namespace: the
				// node's state says it is starting, the event says why not.
				r.Recorder.Eventf(n, nil, corev1.EventTypeWarning, "WorkloadRefused", "Reconcile",
					"the CUDA workload pod %s could not be created: %v", name, err)
			}
			return err
		})
		if err != nil || !placed {
			return !placed && err == nil, err
		}
	}
	for _, p := range all {
		if p.Node != node || p.Name == name || p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, p.Ref(), client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil &&
			!apierrors.IsConflict(err) {
			return false, fmt.Errorf("deleting the older CUDA workload pod %s: %w", p.Name, err)
		}
	}
	return false, nil
}

func (r *Reconciler) workloadLimit() int {
	if r.WorkloadProofs > 0 {
		return r.WorkloadProofs
	}
	return DefaultWorkloadProofs
}

// place runs create when fewer than limit CUDA workload pods run, counting
// those of pods (the index's) that have not ended and those created here
// that the index does not show yet. It reports whether it created.
func (s *workloadStarts) place(pods []*operandpods.Pod, name string, limit int, now time.Time, create func() error) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		if p.DeletionTimestamp == nil && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed {
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
	if err := create(); err != nil {
		return false, err
	}
	s.unseen[name] = now
	return true, nil
}
