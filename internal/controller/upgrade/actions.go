package upgrade

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictionTimeout bounds one eviction request.
const evictionTimeout = 2 * time.Second

// evict evicts, through the Eviction API (which honours
// PodDisruptionBudgets), the node's pods that keep selects. Pods no
// controller owns are evicted only with force, pods with emptyDir volumes
// only with deleteEmptyDir; the others stay, and the step's timeout decides.
func (r *Reconciler) evict(ctx context.Context, n *corev1.Node, keep func(*corev1.Pod) bool, force, deleteEmptyDir *bool) error {
	pods, err := r.podsOn(ctx, n.Name, "")
	if err != nil {
		return err
	}
	var errs []error
	for i := range pods {
		p := &pods[i]
		if !keep(p) || p.DeletionTimestamp != nil {
			continue
		}
		if metav1.GetControllerOf(p) == nil && !isTrue(force) {
			r.Recorder.Eventf(n, p, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict",
				"pod %s/%s has no controller and force is off: it keeps the upgrade waiting", p.Namespace, p.Name)
			continue
		}
		if usesEmptyDir(p) && !isTrue(deleteEmptyDir) {
			r.Recorder.Eventf(n, p, corev1.EventTypeWarning, "GPUDriverUpgrade", "Evict",
				"pod %s/%s uses emptyDir and deleteEmptyDir is off: it keeps the upgrade waiting", p.Namespace, p.Name)
			continue
		}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		// A PodDisruptionBudget answers 429 with a Retry-After, which the
		// client would wait out again and again: bound the call instead, and
		// try again on the next poll.
		evictCtx, cancel := context.WithTimeout(ctx, evictionTimeout)
		err := r.Client.SubResource("eviction").Create(evictCtx, p, eviction)
		cancel()
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err), errors.Is(err, context.DeadlineExceeded):
			// Not now; the step's timeout decides how long to keep trying.
		default:
			errs = append(errs, fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// deleteDriverPod deletes the node's outdated driver pod; its DaemonSet
// creates one with the new spec.
func (r *Reconciler) deleteDriverPod(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return nil
	}
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting driver pod %s: %w", pod.Name, err)
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
