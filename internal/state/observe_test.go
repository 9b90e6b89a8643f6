package state

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const hashKey = "hash"

func TestObserve(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	grace := 30 * time.Second
	pod := func(ready bool, since time.Time, mutate ...func(*corev1.Pod)) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", Annotations: map[string]string{hashKey: "h1"},
				CreationTimestamp: metav1.NewTime(since.Add(-time.Minute))},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)},
			}},
		}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	waiting := func(reason string, restarts int32) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: restarts,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}
		}
	}
	tests := map[string]struct {
		pod         *corev1.Pod
		desired     string
		wantNil     bool
		wantReady   bool
		wantCurrent bool
		wantFailure string
		wantSince   time.Time
	}{
		"no pod":      {wantNil: true},
		"terminating": {pod: pod(true, now, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }), wantNil: true},
		"ready and current": {pod: pod(true, now.Add(-time.Hour)), desired: "h1",
			wantReady: true, wantCurrent: true, wantSince: now.Add(-time.Hour)},
		"ready and outdated":                  {pod: pod(true, now), desired: "h2", wantReady: true, wantSince: now},
		"no desired hash: any pod is current": {pod: pod(true, now), wantReady: true, wantCurrent: true, wantSince: now},
		"no Ready condition yet: since creation": {
			pod:     pod(false, now, func(p *corev1.Pod) { p.Status.Conditions = nil }),
			desired: "h1", wantCurrent: true, wantSince: now.Add(-time.Minute)},
		"crash loop below the threshold": {pod: pod(false, now, waiting("CrashLoopBackOff", 2)), desired: "h1",
			wantCurrent: true, wantSince: now},
		"crash loop at the threshold": {pod: pod(false, now, waiting("CrashLoopBackOff", 3)), desired: "h1",
			wantCurrent: true, wantSince: now, wantFailure: "container c of pod p is crash-looping (3 restarts)"},
		"image pull error within the grace period": {pod: pod(false, now.Add(-10*time.Second), waiting("ImagePullBackOff", 0)),
			desired: "h1", wantCurrent: true, wantSince: now.Add(-10 * time.Second)},
		"image pull error past the grace period": {pod: pod(false, now.Add(-time.Minute), waiting("ImagePullBackOff", 0)),
			desired: "h1", wantCurrent: true, wantSince: now.Add(-time.Minute), wantFailure: "container c of pod p: ImagePullBackOff: m"},
		"failed pod": {pod: pod(false, now, func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted" }),
			desired: "h1", wantCurrent: true, wantSince: now, wantFailure: "pod p failed: Evicted"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := Observe(tt.pod, hashKey, tt.desired, grace, now)
			if tt.wantNil {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Ready).To(Equal(tt.wantReady))
			g.Expect(f.Current).To(Equal(tt.wantCurrent))
			g.Expect(f.Failure).To(Equal(tt.wantFailure))
			g.Expect(f.Since).To(Equal(tt.wantSince))
		})
	}
}
