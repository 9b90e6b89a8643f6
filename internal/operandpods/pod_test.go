package operandpods

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

func TestSummarizeKeepsWhatTheOperatorReads(t *testing.T) {
	g := NewWithT(t)
	created := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "gpu-operator", UID: "u", ResourceVersion: "9", CreationTimestamp: created,
			Labels: map[string]string{render.LabelState: "driver", render.LabelManagedBy: render.ManagedBy,
				"controller-revision-hash": "7d9f", "team": "gpu"},
			Annotations:   map[string]string{render.AnnotationTemplateHash: "h", "other": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			OwnerReferences: []metav1.OwnerReference{
				{Kind: "Node", Name: "gpu-1"},
				{Kind: "DaemonSet", Name: "nvidia-driver-daemonset", Controller: ptr.To(true)},
			},
		},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "c", Image: "i",
			Env: []corev1.EnvVar{{Name: "A", Value: "a"}, {Name: state.DriverConfigDigestEnv, Value: "h"}}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: created}},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "host-check", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Message: "found"}}},
				{Name: "earlier", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: strings.Repeat("m", 1000)}}},
				{Name: "running", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 4, Image: "i", ImageID: "sha",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}}}},
		},
	}
	s := Summarize(pod)
	g.Expect(s.Name).To(Equal("p"))
	g.Expect(s.Namespace).To(Equal("gpu-operator"))
	g.Expect(s.UID).To(BeEquivalentTo("u"))
	g.Expect(s.ResourceVersion).To(Equal("9"))
	g.Expect(s.CreationTimestamp).To(Equal(created))
	g.Expect(s.ObjectMeta.Labels).To(BeNil())
	g.Expect(s.ManagedFields).To(BeNil())
	g.Expect(s.ObjectMeta.OwnerReferences).To(BeNil())
	g.Expect(s.ObjectMeta.Annotations).To(BeNil())
	g.Expect(s.Annotations).To(Equal([]state.Annotation{{Key: render.AnnotationTemplateHash, Value: "h"}}))
	g.Expect(s.Annotation(render.AnnotationTemplateHash)).To(Equal("h"))
	g.Expect(s.Annotation("other")).To(BeEmpty())
	g.Expect(s.Node).To(Equal("gpu-1"))
	g.Expect(s.State).To(Equal(state.Driver))
	g.Expect(s.ConfigDigest).To(Equal("h"), "a driver pod's configuration digest")
	g.Expect(s.DaemonSet).To(Equal("nvidia-driver-daemonset"))
	g.Expect(s.Phase).To(Equal(corev1.PodRunning))
	g.Expect(s.HasReady).To(BeTrue())
	g.Expect(s.Ready).To(BeFalse())
	g.Expect(s.ReadySince).To(Equal(created.Time))
	g.Expect(s.Exits).To(Equal([]state.Exit{{Container: "host-check", Code: 3, Message: "found"},
		{Container: "earlier", Message: strings.Repeat("m", maxMessage)}}))
	g.Expect(s.Waiting).To(Equal([]Waiting{{Container: "c", Reason: "CrashLoopBackOff", Message: "back-off", Restarts: 4}}))

	g.Expect(summarize(s)).To(BeIdenticalTo(s), "a transform may see its own output")
	copied := s.DeepCopyObject().(*Pod)
	g.Expect(copied).To(Equal(s))
	copied.Annotations[0].Value, copied.Exits[0].Code, copied.Waiting[0].Reason = "y", 9, "z"
	g.Expect(s.Annotations[0].Value).To(Equal("h"))
	g.Expect(s.Exits[0].Code).To(BeEquivalentTo(3))
	g.Expect(s.Waiting[0].Reason).To(Equal("CrashLoopBackOff"))
}

func TestSummaryOfAPodNoDaemonSetControls(t *testing.T) {
	g := NewWithT(t)
	orphan := Summarize(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p",
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "gone"}}}})
	g.Expect(orphan.DaemonSet).To(BeEmpty(), "an owner that is not the controller")
	g.Expect(orphan.Ref()).To(Equal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}))
}

const hashKey = render.AnnotationTemplateHash

func TestFacts(t *testing.T) {
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
		"init container waiting": {pod: pod(false, now.Add(-time.Minute), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: "no secret"}}}}
		}), desired: "h1", wantCurrent: true, wantSince: now.Add(-time.Minute),
			wantFailure: "container init of pod p: CreateContainerConfigError: no secret"},
		"failed pod": {pod: pod(false, now, func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted" }),
			desired: "h1", wantCurrent: true, wantSince: now, wantFailure: "pod p failed: Evicted"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var s *Pod
			if tt.pod != nil {
				s = Summarize(tt.pod)
			}
			f := s.Facts(hashKey, tt.desired, grace, now)
			if tt.wantNil {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.UID).To(BeEquivalentTo("u1"))
			g.Expect(f.Ready).To(Equal(tt.wantReady))
			g.Expect(f.Current).To(Equal(tt.wantCurrent))
			g.Expect(f.Failure).To(Equal(tt.wantFailure))
			g.Expect(f.Since).To(Equal(tt.wantSince))
		})
	}
}

func TestNewerPrefersTheLiveThenTheNewest(t *testing.T) {
	g := NewWithT(t)
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 1, 0, min, 0, 0, time.UTC)) }
	old := &Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(0)}}
	young := &Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(5)}}
	leaving := &Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(9), DeletionTimestamp: ptr.To(at(10))}}
	g.Expect(young.Newer(old)).To(BeTrue())
	g.Expect(old.Newer(young)).To(BeFalse())
	g.Expect(old.Newer(leaving)).To(BeTrue())
	g.Expect(leaving.Newer(old)).To(BeFalse())
}

// A CUDA workload pod on a DRA node is made unbound, for the scheduler:
// the index keeps it on the node it proves (its annotation) from the
// start, with the scheduler's word while it is not bound, and reads its
// run from its binding, not its creation. A DaemonSet's unbound pod stays
// off every node until it is bound: the states judge bound pods.
func TestUnboundWorkloadPodIsOnItsNode(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	pod := cudaworkload.Pod(cp, "gpu-operator", "gpu-1", cudaworkload.Request{Generation: "g", Attempt: 1,
		DeviceClass: cudaworkload.GPUDeviceClass})
	pod.CreationTimestamp = metav1.NewTime(created)
	g.Expect(pod.Spec.NodeName).To(BeEmpty())

	s := Summarize(pod)
	g.Expect(s.Node).To(Equal("gpu-1"))
	g.Expect(s.Unscheduled).To(Equal("not yet looked at by the scheduler"))

	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 1 cannot allocate all claims."}}
	s = Summarize(pod)
	g.Expect(s.Unscheduled).To(Equal("Unschedulable: 0/3 nodes are available: 1 cannot allocate all claims."))
	g.Expect(s.Facts("", "", time.Minute, created).Unscheduled).To(Equal(s.Unscheduled))
	g.Expect(s.Facts("", "", time.Minute, created).Since).To(Equal(created))

	bound := created.Add(time.Hour)
	pod.Spec.NodeName = "gpu-1"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(bound)}}
	s = Summarize(pod)
	g.Expect(s.Node).To(Equal("gpu-1"))
	g.Expect(s.Unscheduled).To(BeEmpty())
	g.Expect(s.Facts("", "", time.Minute, bound).Since).To(Equal(bound), "it runs since it was bound, an hour after it was made")

	pod.Spec.NodeName = ""
	pod.Status.Conditions = nil
	pod.Labels[render.LabelState] = string(state.DevicePlugin)
	g.Expect(Summarize(pod).Node).To(BeEmpty(), "an unbound DaemonSet pod is on no node")
}
