package controllertest

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// kubelet sets a pod's status as its behaviour says, writing only when it
// changes.
func (s *Cluster) kubelet(ctx context.Context, p *corev1.Pod, node *corev1.Node) error {
	if p.DeletionTimestamp != nil {
		if asked := deletionAsked(p); p.Labels[render.LabelState] == string(state.Driver) && time.Since(asked) < s.driverStopTime() {
			return nil
		}
		// No kubelet confirms a graceful deletion here: finish it.
		return client.IgnoreNotFound(s.c.Delete(ctx, p, client.GracePeriodSeconds(0)))
	}
	if node != nil {
		if st := fakenode.DriverCheck(node, p); st != nil {
			// The host has its own driver: the pod's check says so.
			if len(p.Status.InitContainerStatuses) > 0 {
				return nil
			}
			p.Status = *st
			return client.IgnoreNotFound(s.c.Status().Update(ctx, p))
		}
	}
	if s.imageMissing(p.Spec.Containers[0].Image) {
		return s.pullFails(ctx, p)
	}
	if p.Labels[render.LabelState] == string(state.CUDAWorkload) {
		// Run to its end, as the node's GPUs let it.
		if node == nil {
			return nil
		}
		if st := fakenode.WorkloadRun(node, p); st != nil {
			p.Status = *st
			if err := s.c.Status().Update(ctx, p); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
		return nil
	}
	if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
		return s.complete(ctx, p)
	}
	b := s.get(p.Spec.NodeName, p.Labels[render.LabelState])
	ready := corev1.ConditionFalse
	if b == BecomesReady {
		ready = corev1.ConditionTrue
	}
	var waiting *corev1.ContainerStateWaiting
	restarts := int32(0)
	if b == CrashLoops {
		waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting failed container"}
		restarts = 5
	}
	if cond := ReadyCondition(p); cond != nil && cond.Status == ready && p.Status.Phase == corev1.PodRunning &&
		(waiting != nil) == hasWaiting(p) {
		return nil
	}
	return s.setStatus(ctx, p, ready, waiting, restarts)
}

func (s *Cluster) setStatus(ctx context.Context, p *corev1.Pod, ready corev1.ConditionStatus, waiting *corev1.ContainerStateWaiting, restarts int32) error {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: p.Spec.Containers[0].Name, Ready: ready == corev1.ConditionTrue, RestartCount: restarts,
		State: corev1.ContainerState{Waiting: waiting},
	}}
	if err := s.c.Status().Update(ctx, p); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// SetDriverStopTime makes a driver pod's deletion wait d for its kubelet,
// as a driver container takes seconds to stop (it unloads the modules, or
// leaves them for its successor): a test that reads the pod's end needs
// it to last. Zero, the default, confirms deletions at the next step.
func (s *Cluster) SetDriverStopTime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.driverStop = d
}

func (s *Cluster) driverStopTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.driverStop
}

// deletionAsked is when a pod's graceful deletion was asked: its deletion
// timestamp less its grace period.
func deletionAsked(p *corev1.Pod) time.Time {
	grace := time.Duration(0)
	if p.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	return p.DeletionTimestamp.Add(-grace)
}

// Restart plays a kubelet restarting every operand pod on a node, as after
// a reboot: each goes not Ready, then Ready again as its behaviour says.
// A pod that ended stays as it ended.
func (s *Cluster) Restart(ctx context.Context, node string) error {
	pods := &corev1.PodList{}
	if err := s.c.List(ctx, pods, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == node && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			if err := s.setStatus(ctx, p, corev1.ConditionFalse, nil, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

func ReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func hasWaiting(p *corev1.Pod) bool {
	return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil
}
