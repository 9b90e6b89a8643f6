package controllertest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The simulated registry: every image is there but those made missing,
// and a pod that does not restart runs to its end.

// SetImageMissing makes an image missing from (true) or present in
// (false) the simulated registry.
func (s *Cluster) SetImageMissing(image string, missing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.wake()
	s.missingImages[image] = missing
}

func (s *Cluster) imageMissing(image string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.missingImages[image]
}

// HoldAdoption stops (true) or resumes (false) the adoption of orphaned
// pods by a DaemonSet whose selector matches them.
func (s *Cluster) HoldAdoption(hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.wake()
	s.adoptionHeld = hold
}

// pullFails leaves a pod of a missing image pending, its container
// waiting on the pull, as a kubelet does.
func (s *Cluster) pullFails(ctx context.Context, p *corev1.Pod) error {
	if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
		p.Status.ContainerStatuses[0].State.Waiting.Reason == "ImagePullBackOff" {
		return nil
	}
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
			Message: fmt.Sprintf("Back-off pulling image %q: not found", p.Spec.Containers[0].Image)}}}}
	return client.IgnoreNotFound(s.c.Status().Update(ctx, p))
}

// complete runs a pod that does not restart to its end, successful.
func (s *Cluster) complete(ctx context.Context, p *corev1.Pod) error {
	if p.Status.Phase == corev1.PodSucceeded {
		return nil
	}
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
		ImageID: "sim://" + p.Spec.Containers[0].Image,
		State:   corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
	return client.IgnoreNotFound(s.c.Status().Update(ctx, p))
}
