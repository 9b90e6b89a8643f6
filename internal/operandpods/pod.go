package operandpods

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// maxMessage bounds a kept container message: a check's verdict is short,
// a crash's message need not be.
const maxMessage = 256

// Pod is what the operator keeps of an operand pod. Its ObjectMeta holds
// the name, namespace, UID, resource version, creation and deletion times;
// no labels, no annotations. Values handed out by the Index are shared:
// read them, never change them.
type Pod struct {
	metav1.ObjectMeta
	// Annotations are the pod's annotations under the operator's prefix:
	// its template hash, the driver's version. The field hides
	// ObjectMeta's map, left empty, so that pod.Annotations[key] does not
	// compile: read them with Annotation.
	Annotations []state.Annotation
	// Labels and OwnerReferences hide ObjectMeta's, left empty, for the
	// same reason: the pod's state and DaemonSet are State and DaemonSet.
	Labels          notKept
	OwnerReferences notKept
	// Node is the node the pod is bound to; for a CUDA workload pod the
	// scheduler has not bound yet (on a DRA node), the node it is pinned
	// to.
	Node string
	// Unscheduled says why the scheduler has not bound a pod yet: its
	// PodScheduled condition's reason and message. Empty for a bound pod.
	Unscheduled string
	// State is the state the pod serves (its LabelState).
	State state.Name
	// DaemonSet names the DaemonSet controlling the pod; empty for none.
	// Workload names the workload the pod was made for (its selector
	// label), which stays while the pod is orphaned: a DaemonSet of that
	// name created again adopts it.
	DaemonSet, Workload string
	Phase               corev1.PodPhase
	// Reason and Message are the pod's own, set when the kubelet refused
	// or evicted it.
	Reason, Message string
	// HasReady says the pod has a Ready condition; Ready is its status and
	// ReadySince when it last changed. A pod without a Ready condition
	// yet has in ReadySince when it was bound to its node, if it was: a
	// pod that waited for the scheduler has run since then, not since
	// its creation.
	HasReady, Ready bool
	ReadySince      time.Time
	// Waiting holds the containers (init containers first) that wait.
	Waiting []Waiting
	// Exits holds each init container's last exit, and each container's
	// that has terminated and will not restart: a one-off pod's verdict.
	Exits []state.Exit
	// Pulled says the kubelet pulled every container's image (each has an
	// image ID): proof that the image exists, whatever the pod did next.
	Pulled bool
	// ConfigDigest is a driver pod's configuration digest, its main
	// container's state.DriverConfigDigestEnv: a pod that has one keeps
	// the modules its install loaded when replaced by a pod of the same
	// digest. Empty for other pods.
	ConfigDigest string
}

// notKept is the type of the fields that hide what a summary drops.
type notKept struct{}

// Waiting is a container waiting to run.
type Waiting struct {
	Container, Reason, Message string
	Restarts                   int32
}

var _ runtime.Object = &Pod{}

// GetObjectKind implements runtime.Object: a summary has no kind of its own.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object {
	out := *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Annotations = append([]state.Annotation(nil), p.Annotations...)
	out.Waiting = append([]Waiting(nil), p.Waiting...)
	out.Exits = append([]state.Exit(nil), p.Exits...)
	return &out
}

// Summarize reduces an operand pod to what the operator reads of it.
func Summarize(p *corev1.Pod) *Pod {
	s := &Pod{Node: p.Spec.NodeName, State: state.Name(p.Labels[render.LabelState]), Workload: p.Labels[render.LabelName],
		Phase: p.Status.Phase, Reason: p.Status.Reason, Message: truncate(p.Status.Message)}
	s.Name, s.Namespace, s.UID, s.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	s.CreationTimestamp, s.DeletionTimestamp = p.CreationTimestamp, p.DeletionTimestamp
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) {
			s.Annotations = append(s.Annotations, state.Annotation{Key: k, Value: v})
		}
	}
	if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" {
		s.DaemonSet = owner.Name
	}
	if s.Node == "" && s.State == state.CUDAWorkload {
		// Made unbound for the scheduler (on a DRA node): on the account
		// of the node it is pinned to.
		s.Node = p.Annotations[cudaworkload.AnnotationNode]
	}
	var scheduled time.Time
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			s.HasReady, s.Ready, s.ReadySince = true, c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue:
			scheduled = c.LastTransitionTime.Time
		case c.Type == corev1.PodScheduled && p.Spec.NodeName == "":
			s.Unscheduled = truncate(strings.TrimPrefix(c.Reason+": "+c.Message, ": "))
		}
	}
	if !s.HasReady && p.Spec.NodeName != "" {
		s.ReadySince = scheduled
	}
	if s.Unscheduled == "" && p.Spec.NodeName == "" {
		s.Unscheduled = "not yet looked at by the scheduler"
	}
	for _, cs := range p.Status.InitContainerStatuses {
		s.addWaiting(cs)
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			s.Exits = append(s.Exits, state.Exit{Container: cs.Name, Code: t.ExitCode, Message: truncate(t.Message)})
		}
	}
	if s.State == state.Driver && len(p.Spec.Containers) > 0 {
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == state.DriverConfigDigestEnv {
				s.ConfigDigest = e.Value
			}
		}
	}
	s.Pulled = len(p.Status.ContainerStatuses) > 0
	for _, cs := range p.Status.ContainerStatuses {
		s.addWaiting(cs)
		s.Pulled = s.Pulled && cs.ImageID != ""
		if t := cs.State.Terminated; t != nil && p.Spec.RestartPolicy == corev1.RestartPolicyNever {
			// The end of a program's output says why it failed.
			s.Exits = append(s.Exits, state.Exit{Container: cs.Name, Code: t.ExitCode, Message: tail(t.Message)})
		}
	}
	return s
}

func (p *Pod) addWaiting(cs corev1.ContainerStatus) {
	if w := cs.State.Waiting; w != nil {
		p.Waiting = append(p.Waiting, Waiting{Container: cs.Name, Reason: w.Reason, Message: truncate(w.Message),
			Restarts: cs.RestartCount})
	}
}

// tail keeps the end of a long message.
func tail(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[len(s)-maxMessage:]
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage]
}

// Facts reduces a state's pod on a node to what the judgement of the state
// reads. A missing or terminating pod gives nil. desiredHash is the
// template hash of the pod's DaemonSet; a pod carrying another one runs an
// older spec.
func (p *Pod) Facts(hashAnnotation, desiredHash string, grace time.Duration, now time.Time) *state.PodFacts {
	if p == nil || p.DeletionTimestamp != nil {
		return nil
	}
	f := &state.PodFacts{
		UID:          p.UID,
		Name:         p.Name,
		Phase:        p.Phase,
		Reason:       p.Reason,
		Message:      p.Message,
		Unscheduled:  p.Unscheduled,
		Annotations:  p.Annotations,
		Since:        p.CreationTimestamp.Time,
		Current:      desiredHash == "" || p.Annotation(hashAnnotation) == desiredHash,
		Ready:        p.Ready,
		Exits:        p.Exits,
		ConfigDigest: p.ConfigDigest,
	}
	if !p.ReadySince.IsZero() {
		f.Since = p.ReadySince
	}
	if !f.Ready {
		f.Failure = p.failure(now.Sub(f.Since) >= grace)
	}
	return f
}

// failure names what keeps a pod from ever becoming ready on its own.
// Image and container-creation errors count only once pastGrace, since a
// registry hiccup heals.
func (p *Pod) failure(pastGrace bool) string {
	if p.Phase == corev1.PodFailed {
		return fmt.Sprintf("pod %s failed: %s", p.Name, p.Reason)
	}
	for _, w := range p.Waiting {
		switch {
		case w.Reason == "CrashLoopBackOff" && w.Restarts >= state.CrashLoopRestarts:
			return fmt.Sprintf("container %s of pod %s is crash-looping (%d restarts)", w.Container, p.Name, w.Restarts)
		case state.WaitingFailure(w.Reason) && pastGrace:
			return fmt.Sprintf("container %s of pod %s: %s: %s", w.Container, p.Name, w.Reason, w.Message)
		}
	}
	return ""
}

// Newer prefers a live pod to a terminating one, then the newest: during a
// rolling update the replacement is the pod that matters.
func (p *Pod) Newer(than *Pod) bool {
	if (p.DeletionTimestamp == nil) != (than.DeletionTimestamp == nil) {
		return p.DeletionTimestamp == nil
	}
	return than.CreationTimestamp.Before(&p.CreationTimestamp)
}

// PerState picks each state's pod among pods, as the node controller's
// judgement reads them: the newer of two (Newer) stands for the state.
// Pods of no state are left out.
func PerState(pods []*Pod) map[state.Name]*Pod {
	chosen := map[state.Name]*Pod{}
	for _, p := range pods {
		if p.State == "" {
			continue
		}
		if cur, ok := chosen[p.State]; !ok || p.Newer(cur) {
			chosen[p.State] = p
		}
	}
	return chosen
}

// Ended reports whether the pod has run to its end (Succeeded or Failed):
// it holds nothing on its node and runs nothing there.
func (p *Pod) Ended() bool { return p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed }

// Annotation returns the value of the pod's annotation key, "" if none.
func (p *Pod) Annotation(key string) string { return state.AnnotationOf(p.Annotations, key) }

// Ref returns a Pod that names this one, to delete it by.
func (p *Pod) Ref() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID}}
}
