package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictionTimeout bounds one eviction request.
const evictionTimeout = 2 * time.Second

// evictWorkers is how many of a node's pods are evicted at once: a
// PodDisruptionBudget holds each refused eviction for up to
// evictionTimeout, and one by one a node with many protected pods would
// hold back the whole fleet's look.
const evictWorkers = 8

// evict evicts, through the Eviction API (which honours
// PodDisruptionBudgets), the node's pods that keep selects. Pods no
// controller owns are evicted only with force, pods with emptyDir volumes
// only with deleteEmptyDir; the others stay, and the step's timeout decides.
func (r *Reconciler) evict(ctx context.Context, n *corev1.Node, reason string, e eviction) error {
	evictable, stays, err := r.evictionOf(ctx, n.Name, e)
	if err != nil {
		return err
	}
	for _, st := range stays {
		r.Recorder.Eventf(n, st.Pod, corev1.EventTypeWarning, reason, "Evict", "pod %s/%s %s: it keeps the node waiting",
			st.Pod.Namespace, st.Pod.Name, st.Why)
	}
	errs := make([]error, len(evictable))
	workqueue.ParallelizeUntil(ctx, evictWorkers, len(evictable), func(i int) {
		errs[i] = r.evictPod(ctx, evictable[i])
	})
	return errors.Join(errs...)
}

// PodStay is a pod an eviction leaves on the node, and why.
type PodStay struct {
	Pod *corev1.Pod
	Why string
}

// evictionOf lists live the node's pods that e selects and splits
// them: those the Eviction API is asked for, and those left in place
// (no controller without force, emptyDir without deleteEmptyDir), which
// keep the node waiting until the step's timeout. Terminating pods are
// in neither.
func (r *Reconciler) evictionOf(ctx context.Context, node string, e eviction) (
	evictable []*corev1.Pod, stays []PodStay, err error) {
	pods, err := r.podsOn(ctx, node, nil)
	if err != nil {
		return nil, nil, err
	}
	for i := range pods {
		p := &pods[i]
		switch {
		case !e.keep(p) || p.DeletionTimestamp != nil:
		case metav1.GetControllerOf(p) == nil && !isTrue(e.force):
			stays = append(stays, PodStay{p, "has no controller and force is off"})
		case usesEmptyDir(p) && !isTrue(e.deleteEmptyDir):
			stays = append(stays, PodStay{p, "uses emptyDir and deleteEmptyDir is off"})
		default:
			evictable = append(evictable, p)
		}
	}
	return evictable, stays, nil
}

// evictPod asks the Eviction API to evict one pod. A refusal (a
// PodDisruptionBudget) is no error: the step tries again at the next look,
// and its timeout decides how long.
func (r *Reconciler) evictPod(ctx context.Context, p *corev1.Pod) error {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	// A PodDisruptionBudget answers 429 with a Retry-After, which the
	// client would wait out again and again: bound the call instead.
	evictCtx, cancel := context.WithTimeout(ctx, evictionTimeout)
	defer cancel()
	switch err := r.Client.SubResource("eviction").Create(evictCtx, p, eviction); {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsTooManyRequests(err), errors.Is(err, context.DeadlineExceeded):
		return nil
	default:
		return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
	}
}

// deleteDriverPod deletes the node's outdated driver pod; its DaemonSet
// creates one with the new spec. A pod of the pool or the kernel the node
// is leaving is left to its DaemonSet, which deletes it once the node
// controller moves the node's pool or kernel label (it does at this step):
// deleted here first, the old DaemonSet would start it again.
func (r *Reconciler) deleteDriverPod(ctx context.Context, n *corev1.Node, obs *observed) error {
	pod := obs.driverPods[n.Name]
	if pod == nil {
		return nil
	}
	if obs.pools.Moves(n.Name, n.Labels) && pod.DaemonSet != "" && !obs.deleting[pod.DaemonSet] {
		return nil
	}
	if err := r.Client.Delete(ctx, pod.Ref(), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting driver pod %s: %w", pod.Name, err)
	}
	return nil
}

// deleteOrphan deletes the driver pod left without a DaemonSet (a pruned
// DaemonSet orphans them, so that the upgrade replaces them one node at a
// time) on a node the upgrade no longer handles: no policy, the driver
// disabled or opted out, the node on its host's driver or no longer a GPU
// node. There the DaemonSet would have deleted it.
func (r *Reconciler) deleteOrphan(ctx context.Context, obs *observed, n *corev1.Node) error {
	pod := obs.driverPods[n.Name]
	if pod == nil || pod.DaemonSet != "" {
		return nil
	}
	if err := r.Client.Delete(ctx, pod.Ref(), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting orphaned driver pod %s: %w", pod.Name, err)
	}
	return nil
}

func usesEmptyDir(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

func isTrue(b *bool) bool { return b != nil && *b }
