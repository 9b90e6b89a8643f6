package state

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CrashLoopRestarts is how many restarts of a crash-looping container make
// its state failed rather than merely not ready.
const CrashLoopRestarts = 3

// waitingFailures are container waiting reasons that do not heal by
// themselves; past the grace period they make the state failed.
var waitingFailures = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// PodFacts is what the judgement of a state on a node needs to know about
// the state's pod there.
type PodFacts struct {
	UID  types.UID
	Name string
	// Ready is the pod's Ready condition.
	Ready bool
	// Since is when Ready last changed, or the pod's creation when it has no
	// Ready condition yet.
	Since time.Time
	// Current is true when the pod runs the desired pod template.
	Current bool
	// Failure says why the pod will not become ready by itself; empty when
	// nothing says so.
	Failure string
	// Annotations are the operator's own annotations of the pod.
	Annotations []Annotation
	// Exits holds the last exit of each init container that exited: a
	// check's verdict travels in its exit code and termination message.
	Exits []Exit
	// Phase is the pod's phase; Reason and Message are the pod's own,
	// set when the kubelet refused or evicted it. A one-off pod, such as
	// the CUDA workload's, ends in Succeeded or Failed.
	Phase           corev1.PodPhase
	Reason, Message string
	// Unscheduled says why the scheduler has not bound the pod yet;
	// empty for a bound pod.
	Unscheduled string
	// ConfigDigest is a driver pod's configuration digest
	// (DriverConfigDigestEnv); empty for other pods.
	ConfigDigest string
}

// Exit is how a container last exited.
type Exit struct {
	Container string
	Code      int32
	Message   string
}

// Annotation is one annotation of a pod. A pod carries one or two of the
// operator's; a slice of them is a fifth of the smallest map.
type Annotation struct{ Key, Value string }

// Annotation returns the value of the pod's annotation key, "" if none.
func (f *PodFacts) Annotation(key string) string {
	return AnnotationOf(f.Annotations, key)
}

// AnnotationOf returns the value of key among annotations, "" if none.
func AnnotationOf(annotations []Annotation, key string) string {
	for _, a := range annotations {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// ExitOf returns the last exit of the named container.
func (f *PodFacts) ExitOf(container string) (Exit, bool) {
	for _, e := range f.Exits {
		if e.Container == container {
			return e, true
		}
	}
	return Exit{}, false
}

// WaitingFailure reports whether a container waiting for this reason will
// not run without someone changing something.
func WaitingFailure(reason string) bool { return waitingFailures[reason] }
